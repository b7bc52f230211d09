"""Pairs of base models: one pair per two models whatever their quants, files kept per run, old ids
redirected, and the migration that merged pairs of files losing nothing."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from inspector.info import inspect_source
from registry.catalog.registration import register
from registry.hub.drafts import compatible_drafts
from registry.models import BaseModel, BenchmarkRun, Pair, PairRedirect
from runner.errors import BenchmarkError
from runner.runs.submit import queue_benchmark
from tests.migrating import leaves, rewind
from tests.registering import reg, synth

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


@pytest.fixture(scope="module")
def qwen(qwen05_header_path, qwen15_header_path):
    return inspect_source(str(qwen05_header_path)), inspect_source(str(qwen15_header_path))


def test_the_quants_of_two_models_in_several_repositories_make_one_pair(qwen, client):
    small, big = qwen
    drafts = [
        reg(small, repo, f"model-{q}.gguf", size=1000)
        for repo in ("alice/s-GGUF", "bob/s-GGUF")
        for q in ("Q4_K_M", "Q8_0")
    ]
    targets = [reg(big, "carol/b-GGUF", f"model-{q}.gguf", size=1000) for q in ("Q4_K_M", "Q6_K", "Q8_0")]
    pair = Pair.objects.get()  # 4 x 3 files, 1 pair
    assert pair.compatible and pair.target_base.name == "Qwen2.5-Coder-1.5B-Instruct"
    assert pair.draft_base.name == "Qwen2.5-Coder-0.5B-Instruct"
    assert (pair.target, pair.draft) == (targets[0], drafts[0])  # checked on the first two that met
    # Every quant of the target finds it, and the model page of each lists it.
    for t in targets:
        assert [p.pk for p in compatible_drafts(t)] == [pair.pk]
        page = client.get(t.model.get_absolute_url() + f"?file={t.pk}").content.decode()
        assert f'href="/pairs/{pair.pk}/"' in page
    page = client.get(drafts[3].model.get_absolute_url()).content.decode()
    assert f'href="/pairs/{pair.pk}/"' in page and "2 repositories, 4 quants" in page
    # The table lists the pair once, with the quants each model has; so do the API and the pair's JSON.
    table = client.get("/").content.decode()
    assert table.count(f'href="/pairs/{pair.pk}/"') >= 1 and "· 3 quants" in table and "· 4 quants" in table
    (row,) = client.get("/api/pairs").json()["results"]
    assert (row["target"]["quants"], row["draft"]["quants"]) == (3, 4)
    assert client.get(f"/api/pairs/{pair.pk}").json()["draft"]["quants"] == 4


def test_an_incompatible_pair_becomes_compatible_when_another_quant_brings_a_matching_tokenizer(tmp_path):
    reg(synth(tmp_path, "t"), "org/t-GGUF", "t-Q4_K_M.gguf", size=1000)
    bos = reg(synth(tmp_path, "d-bos", add_bos=True, bos=1), "org/d-GGUF", "d-Q4_K_M.gguf", size=1000)
    pair = Pair.objects.get()
    assert not pair.compatible and pair.failed_rule == "bos" and pair.draft == bos
    plain = reg(
        synth(tmp_path, "d"), "org/d-GGUF", "d-Q8_0.gguf", size=1000
    )  # the same model, converted without the BOS
    pair.refresh_from_db()
    assert pair.compatible and pair.draft == plain and pair.result["failed_rule"] is None
    assert Pair.objects.count() == 1
    # A quant of a decided pair changes nothing (and costs no check).
    again = register(
        synth(tmp_path, "d2", add_bos=True, bos=1),
        source="hf://org/d-GGUF/d-Q2_K.gguf",
        repo="org/d-GGUF",
        path="d-Q2_K.gguf",
    )
    assert (again.pairs_added, again.pairs_updated) == (0, 0)


def test_a_run_records_the_quants_it_measures_and_refuses_an_incompatible_one(tmp_path):
    weights = {"tensors": {"token_embd.weight": np.zeros((4, 8), np.float32)}}  # a file llama.cpp could load
    t = reg(synth(tmp_path, "t", **weights), "org/t-GGUF", "t-Q4_K_M.gguf", size=1000)
    d = reg(synth(tmp_path, "d", **weights), "org/d-GGUF", "d-Q4_K_M.gguf", size=1000)
    t8 = reg(synth(tmp_path, "t8", **weights), "org/t-GGUF", "t-Q8_0.gguf", size=1000)
    bos = reg(synth(tmp_path, "dbos", add_bos=True, bos=1, **weights), "org/d-GGUF", "d-Q2_K.gguf", size=1000)
    pair = Pair.objects.get()
    run = queue_benchmark(pair, {}, send=False)
    assert (run.target_file, run.draft_file) == (t, d)
    run = queue_benchmark(pair, {}, send=False, files=(t8, d))
    assert (run.measured_target, run.measured_draft, run.pair) == (t8, d, pair)
    with pytest.raises(BenchmarkError, match="rule 'bos' fails, although other quants of the two models can"):
        queue_benchmark(pair, {}, send=False, files=(t8, bos))


def test_an_old_pair_id_redirects_to_the_pair_it_was_merged_into(tmp_path, client):
    reg(synth(tmp_path, "t"), "org/t-GGUF", "t-Q4_K_M.gguf", size=1000)
    reg(synth(tmp_path, "d"), "org/d-GGUF", "d-Q4_K_M.gguf", size=1000)
    pair = Pair.objects.get()
    PairRedirect.objects.create(old_id=pair.pk + 1000, pair=pair)
    r = client.get(f"/pairs/{pair.pk + 1000}/?tab=runs")
    assert r.status_code == 301 and r["Location"] == f"/pairs/{pair.pk}/?tab=runs"
    r = client.get(f"/api/pairs/{pair.pk + 1000}")
    assert r.status_code == 301 and r["Location"] == f"/api/pairs/{pair.pk}"
    assert client.get(f"/pairs/{pair.pk + 2000}/").status_code == 404


BEFORE = [("registry", "0013_tokenizer_classes_and_base_models"), ("team", "0003_scrape_queue_and_errors_trimmed")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_merges_pairs_of_files_into_pairs_of_base_models_losing_nothing():
    latest = leaves()
    executor = rewind(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    now = timezone.now()
    Base, Model, File = (apps.get_model("registry", n) for n in ("BaseModel", "Model", "GGUFFile"))
    OldPair, Run, Result = (apps.get_model("registry", n) for n in ("Pair", "BenchmarkRun", "BenchmarkResult"))
    Reported, Predicted, Change = (
        apps.get_model("registry", n) for n in ("ReportedResult", "PredictedResult", "VerdictChange")
    )
    Note, Deployment = apps.get_model("team", "Note"), apps.get_model("team", "Deployment")

    def file(base_key: str, name: str):
        base, _ = Base.objects.get_or_create(key=base_key, defaults={"name": base_key, "rule": "header"})
        model, _ = Model.objects.get_or_create(repo="org/r", name=name, defaults={"base": base})
        return File.objects.create(
            source=f"hf://org/r/{name}.gguf",
            repo="org/r",
            path=f"{name}.gguf",
            model=model,
            info={},
            vocab_key="bpe:x",
            vocab_type="bpe",
            architecture="llama",
            arch_kind="transformer",
            inspected_at=now,
        )

    t1, t2 = file("big", "big-a"), file("big", "big-b")
    d1, d2 = file("small", "small-a"), file("small", "small-b")
    other = file("other", "other")
    pairs = {}
    for t, d in [(t1, d1), (t1, d2), (t2, d1), (t2, d2), (t1, other)]:
        pairs[(t.pk, d.pk)] = OldPair.objects.create(
            target=t, draft=d, compatible=True, llama_cpp_compatible=True, rules_from="b11434", checked_at=now
        )
    p11, p12, p21, p22 = (pairs[(t.pk, d.pk)] for t in (t1, t2) for d in (d1, d2))
    OldPair.objects.filter(pk=p21.pk).update(best_kind="measured", best_speedup=1.5, best_k=8)
    OldPair.objects.filter(pk=p12.pk).update(best_kind="reported", best_speedup=2.0, best_k=4)
    run = Run.objects.create(pair=p21, queue="q", status="done")
    Result.objects.create(run=run, pair=p21, k=8, n_predict=64, repeats=1, n_prompts=1, status="ok", speedup=1.5)
    Predicted.objects.create(run=run, pair=p21, k=8, n_predict=64, n_prompts=1, speedup=1.4)
    Reported.objects.create(pair=p12, k=4, citation="a paper", speedup=2.0)
    Change.objects.create(pair=p11, old_compatible=False, new_compatible=True, new_rules_from="b11434", changed_at=now)
    Note.objects.create(pair=p22, body="works", author_name="ann")
    Deployment.objects.create(
        target=t1, draft=d2, pair=p12, method="draft-simple", command="llama-server", author_name="ann", deployed_at=now
    )

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(latest)

    from registry.models import BenchmarkResult, PredictedResult, ReportedResult, VerdictChange
    from registry.team.models import Deployment as Dep
    from registry.team.models import Note as N

    assert Pair.objects.count() == 2  # big/small (four pairs of files) and big/other
    merged = Pair.objects.get(draft_base__key="small")
    assert merged.target_base.key == "big" and merged.pk in {p11.pk, p12.pk, p21.pk, p22.pk}
    # Every record points at it, and nothing was deleted with the pairs that went.
    assert BenchmarkRun.objects.get().pair_id == merged.pk
    assert BenchmarkResult.objects.get().pair_id == PredictedResult.objects.get().pair_id == merged.pk
    assert ReportedResult.objects.get().pair_id == VerdictChange.objects.get().pair_id == merged.pk
    assert N.objects.get().pair_id == Dep.objects.get().pair_id == merged.pk
    # The run keeps the files it measured; the best measured figure wins over a higher reported one.
    r = BenchmarkRun.objects.get()
    assert (r.target_file_id, r.draft_file_id) == (t2.pk, d1.pk)
    assert (merged.best_kind, merged.best_speedup, merged.best_k) == ("measured", 1.5, 8)
    gone = {p11.pk, p12.pk, p21.pk, p22.pk} - {merged.pk}
    assert dict(PairRedirect.objects.values_list("old_id", "pair_id")) == {pk: merged.pk for pk in gone}
    assert BaseModel.objects.filter(classes__isnull=False).count() == 0  # those files had no tokenizer


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_every_file_its_method_as_a_column():
    # 0024: pairing reads the method from a column; files registered before get it from their stored inspection,
    # cut to the column's length (an inspection imported from a knowledge base may carry anything).
    before, after = [("registry", "0023_pair_with_figures_index")], [("registry", "0024_file_speculative_type")]
    latest = leaves()
    executor = rewind(before)
    old_apps = executor.loader.project_state(before).apps
    File, Model = old_apps.get_model("registry", "GGUFFile"), old_apps.get_model("registry", "Model")
    model = Model.objects.create(repo="org/r", name="m")
    common = {
        "model": model,
        "vocab_key": "bpe:x",
        "vocab_type": "bpe",
        "architecture": "llama",
        "arch_kind": "transformer",
    }
    for name, info in [
        ("eagle", {"speculative_type": "draft-eagle3"}),
        ("none", {}),
        ("long", {"speculative_type": "x" * 40}),
    ]:
        File.objects.create(source=name, info=info, inspected_at=timezone.now(), **common)
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    File = executor.loader.project_state(after).apps.get_model("registry", "GGUFFile")
    assert dict(File.objects.values_list("source", "speculative_type")) == {
        "eagle": "draft-eagle3",
        "none": "",
        "long": "x" * 32,
    }
    MigrationExecutor(connection).migrate(latest)


def test_a_pair_is_found_by_either_side_through_an_index_and_written_into_no_redundant_one():
    # 0025: a pair is written into every index of its table, so draft, target_base and draft_base have no index of
    # their own (each leads a composite one) and the verdict no pattern index; every lookup by one side still reads
    # an index.
    with connection.cursor() as c:
        indexes = [
            v["columns"]
            for v in connection.introspection.get_constraints(c, Pair._meta.db_table).values()
            if (v["index"] or v["unique"]) and v["columns"] and v["columns"][0]
        ]
    assert {"target_id", "draft_id", "target_base_id", "draft_base_id", "verdict"} <= {cols[0] for cols in indexes}
    assert not [cols for cols in indexes if cols in (["draft_id"], ["target_base_id"], ["draft_base_id"])]
    assert indexes.count(["verdict"]) == 1
