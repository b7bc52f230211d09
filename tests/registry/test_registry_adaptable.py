"""Adaptable near-miss pairs in the registry: the row, the pair page, the API and find_drafts say
when adapt_draft could make an incompatible draft acceptable, from the stored token texts and types.

Real headers only: DeepSeek-R1-Distill-Qwen-7B (the real header) against Qwen2.5-Coder-0.5B and -1.5B (adaptable: 7
special tokens and the BOS), 1.5B against 0.5B (compatible), and a Qwen2.5-Coder-0.5B header written here with gguf-py
(another model's name, one ordinary token's text changed: not adaptable).
"""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from inspector.info import inspect_source
from registry.catalog.adaptable import decide_pending
from registry.catalog.registration import register
from registry.models import AdaptCheck, GGUFFile, TokenTypeTable
from tests.migrating import leaves, rewind
from tests.models import model_path
from tests.real_files import ORDINARY, pair_of
from tests.registering import reg
from tests.runs import predict_run

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

R1_KEYS = {
    "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.padding_token_id",
}


def test_token_types_are_stored_beside_the_texts_once_per_content(files, headers):
    q05 = files["q05"]
    assert q05.token_types is not None and q05.token_types.count == q05.n_vocab == 151_936
    again = reg(headers["q05"], "someone/copy-GGUF", "copy.gguf", finished=True)  # another file with the same header
    assert again.token_types_id == q05.token_types_id
    assert TokenTypeTable.objects.filter(pk=q05.token_types_id).count() == 1
    assert files["r1"].token_types.count == files["r1"].n_vocab == 152_064


def test_the_api_says_which_incompatible_pairs_are_adaptable(client, files):
    r1, q05, q15, other = files["r1"], files["q05"], files["q15"], files["other"]
    near = pair_of(r1, q05)
    assert (near.compatible, near.failed_rule) == (False, "bos")
    data = client.get(f"/api/pairs/{near.pk}").json()
    assert data["adaptable"]["summary"] == "7 special tokens, BOS"
    assert data["adaptable"]["changed_tokens"] == 7
    assert {k["key"] for k in data["adaptable"]["keys"]} == R1_KEYS
    full = data["adaptability"]
    assert full["state"] == "adaptable" and full["plan"]["changed_ids"] == list(range(151_643, 151_650))
    assert [t["text"] for t in full["plan"]["tokens"]][-2:] == ["<think>", "</think>"]
    # compatible: nothing to adapt; an ordinary token's text differs: refused with the rule
    assert client.get(f"/api/pairs/{pair_of(q15, q05).pk}").json()["adaptable"] is None
    refused = client.get(f"/api/pairs/{pair_of(r1, other).pk}").json()
    assert refused["adaptable"] is None
    assert refused["adaptability"]["state"] == "refused" and refused["adaptability"]["rule"] == "token_text"
    assert f"Token {ORDINARY:,} differs" in refused["adaptability"]["detail"]
    rows = {(r["target"]["id"], r["draft"]["id"]): r for r in client.get("/api/pairs?verdict=all").json()["results"]}
    assert rows[(r1.pk, q05.pk)]["adaptable"]["summary"] == "7 special tokens, BOS"
    assert rows[(r1.pk, q15.pk)]["adaptable"]["summary"] == "7 special tokens, BOS"
    assert rows[(q15.pk, q05.pk)]["adaptable"] is None and rows[(r1.pk, other.pk)]["adaptable"] is None
    # decided once per file pair and stored: the next read finds it
    assert AdaptCheck.objects.filter(target=r1, draft=q05, state="adaptable").count() == 1


def test_a_job_decides_once_and_the_table_only_reads(client, files, headers):
    r1, q05, q15 = files["r1"], files["q05"], files["q15"]
    # Decided when the job that registered them ended, before any page was read.
    stored = {(a.target_id, a.draft_id): a.state for a in AdaptCheck.objects.all()}
    assert stored[(r1.pk, q05.pk)] == stored[(r1.pk, q15.pk)] == "adaptable"
    # Without a stored decision the table, the API's list and the CSV say nothing (they never decide: a page of
    # near-misses from many families would read every family's token tables), and reading writes no row.
    AdaptCheck.objects.all().delete()
    rows = client.get("/api/pairs?verdict=all").json()["results"]
    assert rows and all(r["adaptable"] is None for r in rows)
    assert not any("adaptable:" in r for r in table_rows(client, "verdict=all"))
    body = b"".join(client.get("/pairs.csv?verdict=all").streaming_content).decode()
    assert "7 special tokens" not in body
    assert not AdaptCheck.objects.exists()
    # One pair's page decides it on read.
    assert client.get(f"/api/pairs/{pair_of(r1, q05).pk}").json()["adaptable"]["changed_tokens"] == 7
    assert list(AdaptCheck.objects.values_list("target_id", "draft_id")) == [(r1.pk, q05.pk)]
    # A registration alone decides nothing; the job's end decides what its files' base models lack, once.
    info = inspect_source(str(headers["q15"]))
    again = register(info, source="hf://someone/q15-copy/q15.gguf", repo="someone/q15-copy", path="q15.gguf").file
    assert not AdaptCheck.objects.filter(draft=q15).exists()
    assert decide_pending([again.pk]) == 2  # the 1.5B's near-misses: as a draft of R1, as the target of "other"
    assert AdaptCheck.objects.get(target=r1, draft=q15).state == "adaptable"
    assert AdaptCheck.objects.get(target=q15, draft=files["other"]).state == "refused"
    assert decide_pending([q05.pk, r1.pk]) == 2  # R1 and the 0.5B with "other"
    assert decide_pending([again.pk, q05.pk, r1.pk]) == 0  # nothing left: two reads
    assert client.get("/api/pairs?verdict=all").json()["results"]


def table_rows(client, query: str) -> list[str]:
    html = client.get(f"/?{query}").content.decode()
    return re.findall(r"<tr>.*?</tr>", html, re.S)


def test_the_table_row_says_adaptable(client, files):
    rows = table_rows(client, "verdict=all")
    adaptable = [r for r in rows if "adaptable: 7 special tokens, BOS" in r]
    assert len(adaptable) == 2 and all("fails bos" in r for r in adaptable)  # R1 with the 0.5B and the 1.5B
    others = [r for r in rows if "pair-link" in r and r not in adaptable]
    assert others and not any("adaptable" in r for r in others)
    body = b"".join(client.get("/pairs.csv?verdict=all").streaming_content).decode()
    csv_rows = list(csv.DictReader(io.StringIO(body)))
    assert sorted(r["adaptable"] for r in csv_rows) == [""] * (len(csv_rows) - 2) + ["7 special tokens, BOS"] * 2


def test_the_pair_page_shows_the_adaptation_or_why_not(client, files):
    r1, q05, q15, other = files["r1"], files["q05"], files["q15"], files["other"]
    html = client.get(f"/pairs/{pair_of(r1, q05).pk}/").content.decode()
    assert 'id="adaptable"' in html and "Adaptable: 7 special tokens, BOS." in html
    assert "&lt;think&gt;" in html and "tokenizer.ggml.add_bos_token" in html
    assert "python manage.py adapt_draft hf://deepseek/R1-Distill-Qwen-7B-GGUF/r1-7b-Q4_K_M.gguf" in html
    refused = client.get(f"/pairs/{pair_of(r1, other).pk}/").content.decode()
    assert "Not adaptable (rule <code>token_text</code>)" in refused
    assert 'id="adaptable"' not in client.get(f"/pairs/{pair_of(q15, q05).pk}/").content.decode()


def test_find_drafts_lists_adaptable_drafts_after_compatible_ones(files):
    r1, q05, q15 = files["r1"], files["q05"], files["q15"]
    predict_run(pair_of(r1, q05), [("draft-simple", 4, 0.0, 0.62, 1.4)])
    out = io.StringIO()
    call_command("find_drafts", r1.source, "--no-hub", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["registered"] == []  # no compatible draft for R1-Distill: the case adapting is for
    by_draft = {a["draft"]["source"]: a for a in data["adaptable"]}
    assert set(by_draft) == {q05.source, q15.source}  # not the draft whose ordinary text differs
    assert by_draft[q05.source]["adaptable"]["summary"] == "7 special tokens, BOS"
    assert by_draft[q05.source]["predicted_acceptance"] == pytest.approx(0.62)
    assert by_draft[q15.source]["predicted_acceptance"] is None
    text = io.StringIO()
    call_command("find_drafts", r1.source, "--no-hub", stdout=text)
    lines = text.getvalue().splitlines()
    start = lines.index("Adaptable drafts (adapt_draft makes them acceptable): 2")
    assert lines.index("Registered compatible drafts: 0") < start
    shown = "\n".join(lines[start + 1 : start + 3])
    assert f"{q05.source}  (adaptable: 7 special tokens, BOS; fails bos as it is, predicted acceptance 62.0%)" in shown
    assert q15.source in shown
    # a target with a compatible draft lists it first, and no adaptable one
    call_command("find_drafts", q15.source, "--no-hub", "--json", stdout=(out := io.StringIO()))
    data = json.loads(out.getvalue())
    assert [p["draft"]["source"] for p in data["registered"]] == [q05.source] and data["adaptable"] == []


def test_files_registered_before_types_were_stored_read_as_cannot_tell(client, files):
    r1, q05 = files["r1"], files["q05"]
    GGUFFile.objects.filter(pk__in=[r1.pk, q05.pk]).update(token_types=None)  # as the migration leaves them,
    AdaptCheck.objects.all().delete()  # with no decision stored (registration decided these with the types)
    data = client.get(f"/api/pairs/{pair_of(r1, q05).pk}").json()
    assert data["adaptable"] is None
    assert data["adaptability"]["state"] == "unknown" and data["adaptability"]["rule"] == "token_types"
    assert "were not stored" in data["adaptability"]["detail"]
    # registered anew (another etag: the file changed), the types are read and the pair is adaptable again
    info = inspect_source(str(model_path("qwen05", headers_only=True)))
    register(info, source=q05.source, repo=q05.repo, path=q05.path, etag="etag-changed", size=info.file_size)
    assert client.get(f"/api/pairs/{pair_of(r1, q05).pk}").json()["adaptable"]["changed_tokens"] == 7


BEFORE = [("registry", "0020_per_class_verdicts")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_every_file_and_leaves_its_types_unknown():
    latest = leaves()
    executor = rewind(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    Model, File = apps.get_model("registry", "Model"), apps.get_model("registry", "GGUFFile")
    model = Model.objects.create(repo="org/r", name="m")
    old = File.objects.create(
        source="hf://org/r/m.gguf",
        repo="org/r",
        path="m.gguf",
        model=model,
        info={"metadata": {"tokenizer.ggml.token_type": "array of 5 int32"}},
        vocab_key="bpe:x",
        vocab_type="bpe",
        architecture="llama",
        arch_kind="transformer",
        inspected_at=timezone.now(),
    )
    executor = MigrationExecutor(connection)
    executor.migrate(latest)
    f = GGUFFile.objects.get(pk=old.pk)
    assert (f.source, f.info, f.token_types_id) == (old.source, old.info, None)
    assert AdaptCheck.objects.count() == 0
