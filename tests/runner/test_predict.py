"""manage.py predict: a prediction per content type and setting from the target's transcript, the replay and a
cost model measured here, as one JSON object; refusals in one line."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.models import MODELS, model_path

pytestmark = pytest.mark.llama

ROOT = Path(__file__).resolve().parents[2]
CODE = "for i in range(10):\n    total += values[i] * weights[i]\n    count += 1\n"
TASKS = {
    "name": "repeat",
    "description": "continuations that repeat their prompt (n-gram methods find drafts there)",
    "tasks": [
        {"id": "copy", "content_type": "code", "prompt": f"Copy this code three times:\n{CODE}\nFirst copy:\n{CODE}\n"},
        {"id": "story", "content_type": "prose", "prompt": "Write two sentences about a lighthouse keeper."},
    ],
}


def predict(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env["SPECREG_DATA_DIR"] = str(tmp_path / "data")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return subprocess.run(
        [sys.executable, "manage.py", "predict", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_predict_prints_one_json_object_with_every_setting_and_the_best(tmp_path, smollm2_path):
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps(TASKS))
    m = str(smollm2_path)
    r = predict(tmp_path, m, m, "--methods", "draft-simple,ngram-mod,draft-eagle3", "--k", "2,4",
                "--task-file", str(tasks), "--n-predict", "24", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)  # exactly one object: json.loads refuses anything after it
    rows = out["predictions"]
    assert {(p["content_type"], p["method"], p["k"]) for p in rows if p["method"] == "draft-simple"} == {
        (c, "draft-simple", k) for c in ("code", "prose") for k in (2, 4)
    }
    for p in rows:
        assert set(p) >= {"method", "draft", "k", "p_min", "content_type", "acceptance", "speedup"}
        if p["method"] == "draft-simple":
            # A model drafting for itself is nearly always right: near-ties flip where its batched and
            # one-token decodes differ in the last bits, as the real run's do.
            assert p["acceptance"] > 0.8 and p["draft"] == m and p["speedup"] > 0
        else:
            assert p["draft"] is None
    ngram_code = [p for p in rows if p["method"] == "ngram-mod" and p["content_type"] == "code"]
    assert any(p["accepted"] > 0 for p in ngram_code)  # the copy task repeats its prompt
    assert set(out["best"]) <= {"code", "prose"} and all(b["speedup"] > 1 for b in out["best"].values())
    assert set(out["seconds"]) == {"transcript", "replay", "forced", "cost_model"}
    target_cost = out["cost_model"]["target"]["seconds"]
    # batches of 1..K+1 tokens for the largest draft length asked (n-gram methods sweep their own, longer)
    assert len(target_cost) >= 5 and all(s > 0 for s in target_cost)
    assert out["not_predictable"][0]["method"] == "draft-eagle3"
    # What the command measured is recorded where the hardware page and other workers find it.
    with sqlite3.connect(tmp_path / "data" / "specreg.sqlite3") as db:
        costs = db.execute("SELECT model_sha256, hardware_class, data FROM runner_costmeasurement").fetchall()
        tasks_kept = {t for (t,) in db.execute("SELECT task FROM runner_kepttranscript")}
    assert costs and costs[0][0] == MODELS["smollm2"].sha256 and costs[0][1].startswith("cpu-")
    assert json.loads(costs[0][2])["seconds"][: len(target_cost)] == pytest.approx(target_cost, abs=1e-6)
    assert tasks_kept == {"repeat/code/copy", "repeat/prose/story"}


def test_an_incompatible_pair_gets_its_failed_rule_and_no_prediction(tmp_path, smollm2_path):
    r = predict(tmp_path, str(smollm2_path), str(model_path("qwen05")), "--json")
    assert r.returncode == 2 and r.stdout == ""
    line = r.stderr.strip().splitlines()[-1]
    assert "cannot draft for" in line and "rule '" in line and "Traceback" not in r.stderr


def test_a_missing_file_and_a_remote_one_are_refused_in_one_line(tmp_path):
    r = predict(tmp_path, str(tmp_path / "nothing.gguf"))
    assert r.returncode == 2 and "no such file" in r.stderr.strip().splitlines()[-1]
    r = predict(tmp_path, "hf://owner/repo/model.gguf")
    assert r.returncode == 2 and "predict reads local files" in r.stderr.strip().splitlines()[-1]
