# The two commands of the README: `make start` (install, migrate, run web server + worker) and
# `make test` (install test dependencies, fetch the test models, run the whole suite).
PYTHON ?= python3
VENV ?= .venv
PORT ?= 8000
BIN := $(VENV)/bin
export CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF
export LLAMA_CPP_BUILD_JOBS ?= 2

.PHONY: install install-test start test models chromium

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The llama extra compiles llama.cpp from source the first time (~10 min on 2 cores); pip
# caches the built wheel, so later installs take seconds.
install: $(BIN)/python
	$(BIN)/pip install -q -e '.[llama]'

install-test: $(BIN)/python
	$(BIN)/pip install -q -e '.[llama,test]'

start: install
	$(BIN)/python manage.py migrate --noinput -v0
	$(BIN)/python manage.py collectstatic --noinput -v0
	$(BIN)/python manage.py serve --port $(PORT)

models: $(BIN)/python
	$(BIN)/python -m tests.models

chromium:
	@command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium >/dev/null)

test: install-test chromium models
	$(BIN)/python -m pytest
