"""Recurrent, hybrid and memory-less models in the registry, as llama.cpp b11434 runs them.

A hybrid target with a draft of its vocabulary is compatible and shows "checkpoints" beside the verdict on the row,
the pair page, the API, the CSV and the knowledge base; a hybrid draft is listed; a memory-less target (BERT) fails the
architecture rule with "no speculation". An upgrade from the older rules marks the moved pairs stale without importing
product code, and ``recheck_pairs --stale`` settles them, recording each change with its state and reason. Runs on
SQLite and (db_service) again on PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from registry.catalog.recheck import STALE
from registry.hub.sources import register_source
from registry.kb.export import export_kb
from registry.models import GGUFFile, Pair, VerdictChange
from tests.migrating import leaves, rewind
from tests.models import model_path
from tests.registering import reg, synth

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

BIG = {"w": np.zeros((64, 64), dtype=np.float32)}
SMALL = {"w": np.zeros((8, 8), dtype=np.float32)}


def pair_of(target: GGUFFile) -> Pair:
    return Pair.objects.select_related("target", "draft").get(target__model__base=target.model.base)


@pytest.fixture
def hybrid_pair(tmp_path):
    target = reg(synth(tmp_path, "big", arch="qwen35", tensors=BIG, hparams=False), "Org/Big-27B-GGUF", "big.gguf")
    reg(synth(tmp_path, "small", arch="llama", tensors=SMALL, hparams=False), "Org/Small-0.8B-GGUF", "small.gguf")
    return pair_of(target)


def test_a_hybrid_target_pairs_with_checkpoints_named_everywhere(client, hybrid_pair, tmp_path):
    p = hybrid_pair
    assert p.compatible and p.failed_rule == "" and p.target.arch_kind == "hybrid"
    row = client.get(f"/api/pairs/{p.pk}").json()
    assert row["compatible"] and row["state"]["kind"] == "checkpoints" and row["state"]["target"] == "checkpoints"
    assert "partly accepted" in row["state"]["cost"]
    table = client.get("/", {"verdict": "all"}).content.decode()
    assert 'class="sub state"' in table and ">checkpoints</div>" in table
    page = client.get(f"/pairs/{p.pk}/").content.decode()
    assert 'id="state"' in page and "speculates with checkpoints" in page
    rows = list(csv.DictReader(io.StringIO(b"".join(client.get("/pairs.csv").streaming_content).decode())))
    assert [r["state"] for r in rows] == ["checkpoints"]
    export_kb(tmp_path / "kb.json")
    [kb_pair] = json.loads((tmp_path / "kb.json").read_text())["pairs"]
    assert kb_pair["compatible"] and kb_pair["state"] == "checkpoints"


def test_a_hybrid_draft_is_listed_with_its_checkpoints(client, tmp_path):
    target = reg(synth(tmp_path, "big", arch="llama", tensors=BIG, hparams=False), "Org/Big-7B-GGUF", "big.gguf")
    draft = reg(
        synth(tmp_path, "small", arch="lfm2", tensors=SMALL, hparams=False), "Org/Small-0.3B-GGUF", "small.gguf"
    )
    p = pair_of(target)
    assert p.compatible and p.draft_id == draft.pk
    state = client.get(f"/api/pairs/{p.pk}").json()["state"]
    assert (state["kind"], state["target"], state["draft"]) == ("checkpoints", "kv", "checkpoints")
    assert draft.info["speculative_type"] == "draft-simple"


def test_a_memoryless_target_is_refused_with_no_speculation(client, tmp_path):
    target = reg(synth(tmp_path, "big", arch="bert", tensors=BIG, hparams=False), "Org/Bert-GGUF", "big.gguf")
    reg(synth(tmp_path, "small", arch="llama", tensors=SMALL, hparams=False), "Org/Small-GGUF", "small.gguf")
    p = pair_of(target)
    assert target.arch_kind == "no-memory"
    assert not p.compatible and p.failed_rule == "architecture" and p.llama_cpp_compatible
    row = client.get(f"/api/pairs/{p.pk}").json()
    assert row["state"]["kind"] == "none" and "does not speculate" in row["state"]["cost"]


BEFORE = [("registry", "0025_pair_fewer_indexes")]


@pytest.mark.django_db(transaction=True)
def test_an_upgrade_marks_moved_pairs_stale_and_recheck_settles_them_with_reasons(tmp_path):
    hybrid_target = reg(
        synth(tmp_path, "big", arch="qwen35", tensors=BIG, hparams=False), "Org/Big-27B-GGUF", "big.gguf"
    )
    reg(synth(tmp_path, "small", arch="llama", tensors=SMALL, hparams=False), "Org/Small-0.8B-GGUF", "small.gguf")
    plain_target = reg(
        synth(tmp_path, "mid", arch="llama", tensors=BIG, hparams=False), "Other/Mid-3B-GGUF", "mid.gguf"
    )
    hybrid, plain = pair_of(hybrid_target), pair_of(plain_target)
    # The older rules' verdict, as such a registry stored it: refused by the architecture rule.
    Pair.objects.filter(pk=hybrid.pk).update(compatible=False, failed_rule="architecture", verdict="incompatible")
    latest = leaves()
    executor = rewind(BEFORE)
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(latest)
    assert Pair.objects.get(pk=hybrid.pk).rules_from.endswith(STALE)
    assert not Pair.objects.get(pk=plain.pk).rules_from.endswith(STALE)
    out = io.StringIO()
    call_command("recheck_pairs", "--stale", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["checked"] == 1
    [change] = report["changed"]
    assert change["old"] == {"compatible": False, "failed_rule": "architecture", "rules_from": "b11434"}
    assert change["new"]["compatible"] and change["new"]["state"] == "checkpoints"
    assert "runs the pair with checkpoints" in change["reason"]
    now = Pair.objects.get(pk=hybrid.pk)
    assert now.compatible and now.verdict == "compatible" and now.rules_from == "b11434"
    v = VerdictChange.objects.get(pair=now)
    assert v.new_state == "checkpoints" and v.reason.startswith("The target (qwen35) is hybrid")


def test_check_pair_the_check_page_and_the_api_say_when_a_draft_is_adaptable(client, settings, tmp_path):
    settings.SPECREG_DATA_DIR = tmp_path
    r1, q05 = model_path("r1_7b_header"), model_path("qwen05", headers_only=True)
    cli = subprocess.run(
        [sys.executable, "manage.py", "check_pair", str(r1), str(q05)], capture_output=True, text=True, timeout=120
    )
    assert cli.returncode == 1 and "  adaptable: 7 special tokens, BOS: adapt_draft writes a copy" in cli.stdout
    as_json = subprocess.run(
        [sys.executable, "manage.py", "check_pair", str(r1), str(q05), "--json"], capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert json.loads(as_json.stdout)["adaptable"] == {"summary": "7 special tokens, BOS", "changed_tokens": 7}
    staff = User.objects.create_user("staff", password="pw", is_staff=True)  # may name server paths
    client.force_login(staff)
    for f in (r1, q05):
        register_source(str(f))  # the web check reads registered files (and the Hub)
    api = client.get("/api/check", {"target": str(r1), "draft": str(q05)}).json()
    assert api["failed_rule"] == "bos" and api["adaptable"]["summary"] == "7 special tokens, BOS"
    page = client.get("/check/", {"target": str(r1), "draft": str(q05)}).content.decode()
    assert 'id="check-adaptable"' in page and "Adaptable: 7 special tokens, BOS." in page
    compatible = client.get("/api/check", {"target": str(q05), "draft": str(q05)}).json()
    assert compatible["adaptable"] is None
