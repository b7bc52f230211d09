"""Long command-line work says what it is doing as each step starts and ends (a benchmark run here, a prediction, a
Hub import), and every command's --help names the default of each option that has one."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys

import pytest
from django.core.management import call_command, get_commands, load_command_class

from runner.runs.params import DEFAULT_PARAMS
from tests.installations import ROOT, migrated_env
from tests.registering import SMOL

# Options whose default is no value at all: nothing to name.
NO_VALUE = (None, False, "", argparse.SUPPRESS)
DJANGO_OPTIONS = {"verbosity", "settings", "pythonpath", "traceback", "no_color", "force_color", "skip_checks"}


def _options(name: str) -> list[argparse.Action]:
    app = get_commands()[name]
    parser = load_command_class(app, name).create_parser("manage.py", name)
    return [a for a in parser._actions if a.option_strings and a.dest not in DJANGO_OPTIONS | {"help"}]


def _help(name: str) -> str:
    out = io.StringIO()
    load_command_class(get_commands()[name], name).create_parser("manage.py", name).print_help(out)
    return " ".join(out.getvalue().split())


def test_every_option_with_a_default_names_it_in_the_help():
    ours = [n for n, app in get_commands().items() if app.split(".")[0] in ("registry", "runner", "inspector")]
    silent = [
        f"{name} {a.option_strings[0]} (default {a.default!r})"
        for name in sorted(ours)
        for a in _options(name)
        if a.default not in NO_VALUE
        and not isinstance(a, argparse._StoreTrueAction)
        and "default" not in (a.help or "")
    ]
    assert not silent, silent


def test_run_benchmarks_run_sized_options_name_the_runs_defaults():
    """Left unset on the command line (the run's parameters fill them), so the help names them itself."""
    text = _help("run_benchmark").split("options:", 1)[1]  # past the usage line
    assert f"(default {DEFAULT_PARAMS['repeats']})" in text.split("--repeats REPEATS", 1)[1][:120]
    assert f"(default {DEFAULT_PARAMS['n_predict']})" in text.split("--n-predict N_PREDICT", 1)[1][:120]
    assert (
        f"(default {DEFAULT_PARAMS['prompts_per_type']})"
        in text.split("--prompts-per-type PROMPTS_PER_TYPE", 1)[1][:120]
    )


@pytest.mark.django_db
def test_a_hub_import_says_each_step_before_it_takes_it(hub):
    out = io.StringIO()
    call_command("import_hf", SMOL, stdout=out)
    lines = out.getvalue().splitlines()
    listing = lines.index(f"listing {SMOL} on the Hub")
    found = lines.index(f"{SMOL}: 1 .gguf file(s) to read, headers only")
    added = next(i for i, line in enumerate(lines) if line.startswith("added"))
    adapt = lines.index("deciding which of the new near-miss pairs can be adapted")
    assert listing < found < added < adapt


@pytest.mark.llama
def test_run_benchmark_here_prints_each_step_while_it_runs(tmp_path, smollm2_path):
    """Six ngram-mod settings, more than a predicted sweep measures: predicted first, then the best measured. Each
    step arrives on stderr while the benchmark still runs, and the finished run keeps no progress message."""
    env = migrated_env(tmp_path, "cpu-progress")
    argv = [sys.executable, "manage.py", "run_benchmark", str(smollm2_path), "--methods", "ngram-mod", "--tasks",
            "json", "--n-predict", "16", "--repeats", "1", "--prompts-per-type", "1", "--here"]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    first = proc.stderr.readline()
    running_then = proc.poll() is None
    rest, _ = proc.stderr.read(), proc.wait(timeout=600)
    stdout = proc.stdout.read() if proc.stdout else ""
    assert proc.returncode == 0, rest[-2000:]
    assert running_then and first.startswith("[") and "llama.cpp b11434" in first
    err = first + rest
    order = [
        "predicting 6 settings first",
        "timing this machine's decoding",
        "predicting json/",
        "prediction finished in",
        "json: measuring the predicted best",
        "measuring: each setting against plain decoding",
        ": plain run 1/2",
        "measured 2 cells in",
    ]
    at = [err.find(x) for x in order]
    assert all(i >= 0 for i in at) and at == sorted(at), list(zip(order, at, strict=True))
    assert "run 1: done" in stdout
    env_db = {**env, "PYTHONPATH": str(ROOT)}
    left = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v0", "-c",
         "from registry.models import BenchmarkRun; print(repr(BenchmarkRun.objects.get().progress_message))"],
        env=env_db, cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert left.stdout.strip() == "''"


@pytest.mark.llama
def test_predict_prints_each_step_as_it_starts_and_ends(tmp_path, smollm2_path):
    """The order of the lines is the promise (a start before its end), not their timing."""
    r = subprocess.run(
        [sys.executable, "manage.py", "predict", str(smollm2_path), "--methods", "ngram-mod", "--tasks", "json",
         "--prompts-per-type", "1", "--n-predict", "16", "--k", "8"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=migrated_env(tmp_path, "cpu-progress"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    order = ["timing this machine's decoding", "cost model: target", "predicting json/", "settings replayed"]
    at = [r.stderr.find(x) for x in order]
    assert all(i >= 0 for i in at) and at == sorted(at), (r.stderr, at)
