"""import_speed_bench: the JSON of llama.cpp's SPEED-Bench client (its own speed_bench.py, run against a real
llama-server with local prompts) stored as reported results; bad files are one line, never a traceback."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from django.core.management import call_command

from inspector.management.base import UserError
from registry.models import Pair, ReportedResult
from tests.llama_source import pinned_file
from tests.local_servers import Server, free_port

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]
ROOT = Path(__file__).resolve().parents[2]

# What SPEED-Bench's dataset rows look like (question_id, category, turns); the real set is on the Hub,
# which tests cannot reach, so speed_bench.py gets these through a stand-in for `datasets`.
PROMPTS = [
    {
        "question_id": "code-1",
        "category": "coding",
        "turns": ["Write a Python function that returns the sum of a list."],
    },
    {
        "question_id": "code-2",
        "category": "coding",
        "turns": ["Write a Python function that reverses a string.", "Now add a docstring to it."],
    },
    {"question_id": "writing-1", "category": "writing", "turns": ["Write two sentences about the sea."]},
]


class LocalDataset:
    """The slice of a `datasets.Dataset` that speed_bench.load_samples uses: a column by name, and rows."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows

    def __getitem__(self, column: str) -> list:
        return [r[column] for r in self.rows]

    def __iter__(self):
        return iter(self.rows)


def local_datasets(rows: list[dict]) -> types.ModuleType:
    mod = types.ModuleType("datasets")
    mod.get_dataset_config_names = lambda repo: ["qualitative"]
    mod.load_dataset = lambda repo, name, split: LocalDataset(rows)
    return mod


def speed_bench_module(monkeypatch) -> types.ModuleType:
    """llama.cpp's own tools/server/bench/speed-bench/speed_bench.py of the pinned build."""
    path = pinned_file("tools/server/bench/speed-bench/speed_bench.py")
    monkeypatch.setitem(sys.modules, "datasets", local_datasets(PROMPTS))
    spec = importlib.util.spec_from_file_location("speed_bench", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "speed_bench", module)  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.llama
def test_a_real_speed_bench_run_against_llama_server_imports_as_reported_results(smollm2_path, tmp_path, monkeypatch):
    server = Server(smollm2_path, free_port(), tmp_path / "llama-server.log")  # SmolLM2 drafting for itself, K=4
    server.start()
    try:
        speed_bench = speed_bench_module(monkeypatch)
        out = tmp_path / "speed.json"
        rc = speed_bench.main(
            [
                "--url",
                server.url,
                "--osl",
                "32",
                "--output",
                str(out),
                "--timeout",
                "120",
                "--extra-inputs",
                json.dumps({"temperature": 0, "speculative.n_max": 4}),
            ]
        )
    finally:
        server.stop()
    assert rc == 0, server.log.read_text()[-2000:]
    written = json.loads(out.read_text())
    assert written["completed_samples"] == 3 and [r["category"] for r in written["summary"]] == [
        "coding",
        "writing",
        "overall",
    ]
    assert written["summary"][-1]["draft_n"] > 0  # the server did speculate

    stdout = tmp_path / "stdout.txt"
    with stdout.open("w") as f:
        call_command(
            "import_speed_bench",
            str(out),
            "--target",
            str(smollm2_path),
            "--method",
            "draft-simple",
            "--draft",
            str(smollm2_path),
            "--hardware",
            "test cpu",
            "--build",
            "b11434",
            stdout=f,
        )
    pair = Pair.objects.get(target__source=str(smollm2_path.resolve()), draft__source=str(smollm2_path.resolve()))
    got = {r.content_type: r for r in ReportedResult.objects.filter(pair=pair)}
    assert set(got) == {"code", "prose"}  # SPEED-Bench's coding and writing; "overall" is their sum
    code = got["code"]
    summary = written["summary"][0]
    assert (
        code.k == 4
        and code.method == "draft-simple"
        and code.hardware == "test cpu"
        and code.llama_cpp_build == "b11434"
    )
    assert code.tokens_per_second == pytest.approx(summary["avg_pred_t_s"])
    assert (
        code.acceptance == pytest.approx(summary["accept_rate"]) and code.speedup is None and code.reported_by is None
    )
    assert (
        "SPEED-Bench qualitative/coding: 2 requests (3 turns" in code.citation and "speed.json sha256:" in code.citation
    )
    assert json.loads(code.notes)["imported_by"] == "import_speed_bench"
    assert "2 reported result(s) added" in stdout.read_text()
    pair.refresh_from_db()
    assert pair.best_kind == "reported"
    # The same file again adds nothing.
    call_command(
        "import_speed_bench",
        str(out),
        "--target",
        str(pair.target_id),
        "--draft",
        str(pair.draft_id),
        "--method",
        "draft-simple",
        "--hardware",
        "test cpu",
        "--build",
        "b11434",
        stdout=open(os.devnull, "w"),
    )
    assert ReportedResult.objects.filter(pair=pair).count() == 2


def bench_json(tmp_path: Path, summary: list[dict], **config) -> Path:
    path = tmp_path / "sb.json"
    path.write_text(
        json.dumps(
            {
                "config": {"bench": "qualitative", "osl": 256, "extra_inputs": {}, **config},
                "selected_samples": 1,
                "completed_samples": 1,
                "failed_samples": 0,
                "summary": summary,
                "results": [],
            }
        )
    )
    return path


ROW = {
    "category": "coding",
    "requests": 4,
    "turns": 4,
    "failed": 0,
    "avg_prompt_t_s": 300.0,
    "avg_pred_t_s": 42.0,
    "avg_latency": 1.0,
    "draft_n": 100,
    "accepted": 70,
    "accept_rate": 0.7,
}


def test_a_draftless_method_goes_on_the_targets_own_pair_with_a_baseline_speedup(pair, tmp_path):
    spec = bench_json(tmp_path, [ROW, dict(ROW, category="overall")])
    plain = tmp_path / "plain.json"
    plain.write_text(
        json.dumps({"config": {}, "summary": [dict(ROW, avg_pred_t_s=30.0, draft_n=0, accepted=0, accept_rate=None)]})
    )
    call_command(
        "import_speed_bench",
        str(spec),
        "--target",
        str(pair.target_id),
        "--method",
        "ngram-mod",
        "--hardware",
        "RTX 4090",
        "--build",
        "b11434",
        "--k",
        "12",
        "--baseline",
        str(plain),
        "--source-url",
        "https://ci.example/run/7",
        stdout=open(os.devnull, "w"),
    )
    r = ReportedResult.objects.get()
    assert r.pair.target_id == r.pair.draft_id == pair.target_id  # the target's own pair
    assert (r.method, r.k, r.content_type, r.speedup, r.baseline_tokens_per_second) == (
        "ngram-mod",
        12,
        "code",
        1.4,
        30.0,
    )
    assert r.source_url == "https://ci.example/run/7" and "plain run plain.json" in r.citation


@pytest.mark.parametrize(
    "content, args, message",
    [
        (b"not json", (), "not JSON"),
        (b'{"config": {}, "summary": [{"category": "x", "requests": NaN}]}', (), "NaN is not a number JSON allows"),
        (b"[1, 2]", (), "not a SPEED-Bench output"),
        (b'{"config": {}, "summary": [{"category": "coding", "requests": -1}]}', (), "'requests' is out of range"),
        (
            b'{"config": {}, "summary": [{"category": "coding", "requests": "4"}]}',
            (),
            "'requests' should be an integer",
        ),
        (b'{"config": {}, "summary": [{"category": "coding", "requests": 1, "accept_rate": 3}]}', (), "above 1"),
        (
            b'{"config": {}, "summary": [{"category": "coding", "requests": 1, "avg_pred_t_s": 9}]}',
            ("--no-k",),
            "does not say K",
        ),
        (b"[" * 100000, (), "nested too deeply"),
        (
            b'{"config": {}, "summary": [{"category": "coding", "requests": 1, "avg_pred_t_s": 9}]}',
            ("--source-url", "javascript:x"),
            "source_url",
        ),
        (
            b'{"config": {}, "summary": [{"category": "coding", "requests": 1, "avg_pred_t_s": 9}]}',
            ("--target", "99999"),
            "no registered file with id 99999",
        ),
    ],
)
def test_bad_files_and_arguments_are_one_line(pair, tmp_path, content, args, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    argv = [
        str(path),
        "--target",
        str(pair.target_id),
        "--draft",
        str(pair.draft_id),
        "--method",
        "draft-simple",
        "--hardware",
        "h",
        "--build",
        "b1",
    ]
    argv += [] if "--no-k" in args else ["--k", "4"]
    argv += [a for a in args if a != "--no-k"]
    with pytest.raises(UserError, match=message.replace("(", r"\(")) as exc:
        call_command("import_speed_bench", *argv)
    assert "\n" not in str(exc.value)
    assert not ReportedResult.objects.exists()


def test_the_command_line_prints_one_line_and_exit_status_2(tmp_path):
    missing_file = tmp_path / "nope.json"
    r = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "import_speed_bench",
            str(missing_file),
            "--target",
            "1",
            "--method",
            "draft-simple",
            "--hardware",
            "h",
            "--build",
            "b1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "nope.json: No such file or directory" in r.stderr
