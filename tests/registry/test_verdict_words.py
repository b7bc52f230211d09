"""One verdict vocabulary (compatible, partial, incompatible) across the filter, the API and its docs, the CSV, the
knowledge base and the pages; "adaptable" as a filter value; unknown values refused, never read as another; the model
page lists adaptable drafts. Real headers: DeepSeek-R1-Distill-Qwen-7B against Qwen2.5-Coder 0.5B and 1.5B."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from registry.kb.schema import PairIn
from registry.models import BenchmarkResult, BenchmarkRun, Pair
from registry.table.request import VERDICTS
from tests.migrating import leaves, rewind
from tests.real_files import pair_of

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


def ids(client, query: str) -> set[tuple[int, int]]:
    rows = client.get(f"/api/pairs?{query}").json()["results"]
    return {(r["target"]["id"], r["draft"]["id"]) for r in rows}


def test_stored_verdicts_use_the_filters_words(files):
    assert set(Pair.objects.values_list("verdict", flat=True)) <= {"compatible", "partial", "incompatible"}
    assert pair_of(files["q15"], files["q05"]).verdict == "compatible"
    assert pair_of(files["r1"], files["q05"]).verdict == "incompatible"


def test_the_filter_takes_each_verdict_adaptable_and_any(client, files):
    r1, q05, q15, other = files["r1"], files["q05"], files["q15"], files["other"]
    assert ids(client, "") == ids(client, "verdict=usable") == ids(client, "verdict=compatible") == {(q15.pk, q05.pk)}
    assert ids(client, "verdict=adaptable") == {(r1.pk, q05.pk), (r1.pk, q15.pk)}  # not r1+other: refused
    incompatible = ids(client, "verdict=incompatible")
    assert (r1.pk, other.pk) in incompatible and (r1.pk, q05.pk) in incompatible
    every = ids(client, "verdict=any")
    assert every == ids(client, "verdict=all") == incompatible | {(q15.pk, q05.pk)}  # the old word still works
    rows = client.get("/api/pairs?verdict=any").json()["results"]
    assert {r["verdict"] for r in rows} == {"compatible", "incompatible"}


def test_an_unknown_filter_value_is_refused_everywhere(client, files):
    api = client.get("/api/pairs?verdict=adaptible")
    assert api.status_code == 400 and "verdict: expected one of usable, compatible" in api.json()["error"]
    assert client.get("/?verdict=adaptible").status_code == 400
    assert client.get("/pairs.csv?verdict=adaptible").status_code == 400


def test_the_menu_the_docs_and_the_csv_say_the_same_words(client, files):
    html = client.get("/").content.decode()
    for value in VERDICTS:
        assert f'<option value="{value}"' in html
    assert '<option value="all"' not in html
    schema = client.get("/api/schema/?format=json").json()
    param = next(p for p in schema["paths"]["/api/pairs"]["get"]["parameters"] if p["name"] == "verdict")
    assert sorted(param["schema"]["enum"]) == sorted(VERDICTS)  # (the schema sorts enums)
    body = b"".join(client.get("/pairs.csv?verdict=any").streaming_content).decode()
    assert ",incompatible," in body and ",none," not in body and ",all," not in body


def test_older_knowledge_base_words_still_import():
    assert PairIn(target="a.gguf", draft="b.gguf", compatible=True, verdict="all").verdict == "compatible"
    assert PairIn(target="a.gguf", draft="b.gguf", compatible=False, verdict="none").verdict == "incompatible"
    assert PairIn(target="a.gguf", draft="b.gguf", compatible=True, verdict="partial").verdict == "partial"


def test_the_empty_hint_never_offers_the_verdict_already_chosen(client, files):
    html = client.get("/?verdict=any&q=no-such-model").content.decode()
    assert "No pairs match" in html and "any verdict</a>" not in html
    html = client.get("/?verdict=partial").content.decode()
    assert "any verdict</a>" in html


def test_the_model_page_lists_adaptable_drafts(client, files):
    html = client.get(files["r1"].get_absolute_url()).content.decode()
    assert 'id="adaptable-drafts"' in html
    section = html[html.index('id="adaptable-drafts"') :]
    assert files["q05"].model.base.name in section and "7 special tokens, BOS" in section


@pytest.mark.django_db(transaction=True)  # SQLite alters tables only outside a transaction
def test_the_migrations_keep_stored_verdicts_and_settle_stored_headlines(files):
    good, near = pair_of(files["q15"], files["q05"]), pair_of(files["r1"], files["q05"])
    run = BenchmarkRun.objects.create(pair=good, queue="bench.x", status=BenchmarkRun.DONE)
    BenchmarkResult.objects.create(
        run=run, pair=good, k=4, method="draft-simple", content_type="code", speedup=2.13, acceptance=0.9,
        n_predict=64, repeats=1, n_prompts=1, status="ok", speedup_min=2.13, speedup_max=2.13, pairs=1,
    )  # fmt: skip
    latest = leaves()
    rewind([("registry", "0026_state_kinds")])
    with connection.cursor() as c:  # as a registry of that version stored them
        c.execute("UPDATE registry_pair SET verdict = 'all', best_kind = 'measured', best_speedup = 2.13 WHERE id = %s",
                  [good.pk])  # fmt: skip
        c.execute("UPDATE registry_pair SET verdict = 'none' WHERE id = %s", [near.pk])
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(latest)
    good.refresh_from_db()
    near.refresh_from_db()
    assert (good.verdict, near.verdict) == ("compatible", "incompatible")
    assert good.best_speedup is None and good.best_note == "no measurable gain: 2.13× in 1 repeat"
