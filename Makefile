# The two commands of the README: `make start` (install, migrate, run web server + worker) and
# `make test` (install test dependencies, fetch the test models, run the whole suite).
PYTHON ?= python3
VENV ?= .venv
PORT ?= 8000
BIN := $(VENV)/bin
export LLAMA_CPP_BUILD_JOBS ?= 2

.PHONY: install install-test llama start test test-fast lint models chromium gpu-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# llama.cpp is compiled from the pinned source the first time (~10 min on 2 cores) for an instruction
# set this machine really runs (never -march=native: see runner/llama/build.py), cached per flag set
# in ~/.cache/specreg/llama-wheel, and checked by a tiny generation; a failing check stops here with
# its cause and the command that fixes it. SPECREG_LLAMA_ISA / SPECREG_LLAMA_CMAKE_ARGS choose another build.
# `make llama` is the name the error messages give for this step; `install` is the same step.
llama: $(BIN)/python
	$(BIN)/pip install -q -e .
	$(BIN)/python -m runner.install install

install: llama

install-test: $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	$(BIN)/python -m runner.install install

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

# The inner loop: every test that needs neither llama.cpp nor a browser (no model downloads beyond
# what those tests read, no compile if llama.cpp is missing: those tests are deselected, not skipped).
test-fast: $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	$(BIN)/python -m pytest -q -n auto -m "not llama and not browser and not slow"

# The layers (import-linter's contracts in pyproject.toml), ruff's rules and formatter, and mypy (strict on
# inspector/, default strictness on registry/ and runner/).
lint: $(BIN)/python
	$(BIN)/pip install -q -e '.[lint]'
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The GPU check's dry run (tests/bench/bench_gpu.py --dry-run): every step of the check a GPU machine without network runs, here on
# the CPU build with tiny random models (2-3 minutes). Its first run gathers build/gpu-carry (the pinned source, the
# Python 3.12 wheels and the token table that machine needs; the network is needed once).
gpu-check: llama
	$(BIN)/python tests/bench/bench_gpu.py --dry-run
