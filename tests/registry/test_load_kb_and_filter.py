"""Results under load: the table's clients filter (page, API, CSV), and the knowledge base's 1.2 fields and soaks."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.http import QueryDict
from django.utils import timezone
from pydantic import ValidationError

from inspector.info import inspect_source
from registry.catalog.registration import register
from registry.kb import schema
from registry.kb.export import export_kb
from registry.kb.importer import KBError, import_kb
from registry.models import (
    BenchmarkResult,
    BenchmarkRun,
    GGUFFile,
    Pair,
    ReportedResult,
    StabilityResult,
)
from registry.results.figures import refresh_best
from registry.table.request import TableQuery
from tests.ggufgen import vocab, write_gguf
from tests.knowledge_bases import HERE, empty_installation

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LOAD = {
    "parallel": 4,
    "latency_p50": 1.25,
    "latency_p95": 2.5,
    "baseline_latency_p95": 3.0,
    "ttft_p50": 0.125,
    "differing_share": 0.25,
    "prompt_repeats": True,
}
INTERVALS = [
    {"t": 60.0, "requests": 12, "tokens": 1536, "tokens_per_second": 25.6, "drafted": 900, "accepted": 630,
     "acceptance": 0.7, "rss_mb": 812.5, "errors": 0, "timeouts": 0, "compared": 12, "differing": 0},
    {"t": 120.0, "requests": 11, "tokens": 1408, "tokens_per_second": 23.5, "drafted": 850, "accepted": 578,
     "acceptance": 0.68, "rss_mb": 813.0, "errors": 1, "timeouts": 0, "compared": 11, "differing": 1},
]  # fmt: skip


@pytest.fixture(autouse=True)
def installation_a(settings):
    settings.SPECREG_INSTALLATION_ID = HERE
    settings.SPECREG_LISTED_MIN_RATIO = 1.0  # every pair listed (registry.catalog.listing)


@pytest.fixture
def pairs(tmp_path) -> dict[str, Pair]:
    """Four files of one vocabulary (six pairs): ``one`` measured at one client, ``load`` at one and at four
    clients (and a failed cell at eight), ``reported`` with a reported figure only, the others with none."""
    files = []
    for i, params in enumerate([1000, 2000, 4000, 8000]):
        p = write_gguf(tmp_path / f"m{i}.gguf", tokens=vocab(100), kv=None)
        info = inspect_source(str(p))
        info.parameter_count = params
        files.append(
            register(
                info, source=f"hf://org/m{i}/m{i}.gguf", repo=f"org/m{i}", path=f"m{i}.gguf", commit=COMMIT, size=1
            ).file
        )
    assert Pair.objects.count() == 6
    by_name = {
        "one": Pair.objects.get(target=files[1], draft=files[0]),
        "load": Pair.objects.get(target=files[2], draft=files[0]),
        "reported": Pair.objects.get(target=files[3], draft=files[0]),
    }
    run = BenchmarkRun.objects.create(pair=by_name["one"], queue="bench.cpu-2c", status="done", hardware_class="cpu-2c")
    cell(run, by_name["one"], clients=1, speedup=1.5)
    run = BenchmarkRun.objects.create(
        pair=by_name["load"], queue="bench.cpu-2c", status="done", hardware_class="cpu-2c"
    )
    cell(run, by_name["load"], clients=1, speedup=2.0)
    cell(run, by_name["load"], clients=4, speedup=1.2, **LOAD)
    cell(run, by_name["load"], clients=8, speedup=None, status="timeout")  # no figures: never matches
    StabilityResult.objects.create(
        run=run,
        pair=by_name["load"],
        deployment_ref=7,
        k=8,
        method="ngram-mod",  # a method with an option of its own (p-min has a field: a draft's carries none)
        options=[["--spec-ngram-mod-n-match", "24"]],
        clients=2,
        parallel=2,
        planned_s=120,
        elapsed_s=121.5,
        interval_s=60,
        status="stable",
        verdict="stable for 2 min at 2 clients",
        command="llama-server -m m2.gguf -md m0.gguf -np 2",
        intervals=INTERVALS,
        requests=23,
        errors=1,
        rss_start_mb=812.5,
        rss_end_mb=813.0,
        acceptance=0.69,
        acceptance_min=0.68,
        acceptance_max=0.7,
        compared=23,
        differing=1,
        tokens_per_second=24.55,
        baseline_tokens_per_second=20.0,
        speedup=1.2275,
        hardware="Some CPU (cpu-2c)",
        llama_cpp_build="b9000",
        finished_at=timezone.now(),
    )
    ReportedResult.objects.create(pair=by_name["reported"], k=4, speedup=1.8, content_type="code", citation="t")
    for p in by_name.values():
        refresh_best(p)
    return by_name


def cell(run: BenchmarkRun, pair: Pair, *, clients: int, speedup: float | None, status: str = "ok", **load) -> None:
    BenchmarkResult.objects.create(
        run=run,
        pair=pair,
        k=8,
        content_type="code",
        n_predict=64,
        repeats=1,
        n_prompts=4,
        status=status,
        via="server",
        clients=clients,
        speedup=speedup,
        tokens_per_second=None if speedup is None else 20 * speedup,
        baseline_tokens_per_second=20.0,
        acceptance=0.7,
        hardware="Some CPU (cpu-2c)",
        llama_cpp_build="b9000",
        **load,
    )


def api_ids(client, **params) -> set[int]:
    page = client.get("/api/pairs", {"verdict": "all", **params}).json()
    streamed = json.loads(
        b"".join(client.get("/api/pairs", {"verdict": "all", "all": "1", **params}).streaming_content)
    )
    assert {r["id"] for r in page["results"]} == {r["id"] for r in streamed["results"]}
    return {r["id"] for r in streamed["results"]}


def csv_ids(client, **params) -> set[int]:
    body = b"".join(client.get("/pairs.csv", {"verdict": "all", **params}).streaming_content).decode()
    return {int(r[-1].rstrip("/").rsplit("/", 1)[1]) for r in list(csv.reader(io.StringIO(body)))[1:]}


def test_the_clients_filter_keeps_pairs_measured_at_that_concurrency(pairs, client):
    one, load, reported = (pairs[k].pk for k in ("one", "load", "reported"))
    assert len(api_ids(client)) == 6
    # Four clients: only the pair measured under that load; a reported figure is one client's.
    assert api_ids(client, clients="4") == csv_ids(client, clients="4") == {load}
    # One client: every measured-at-one result, and reported figures as they are.
    assert api_ids(client, clients="1") == csv_ids(client, clients="1") == {one, load, reported}
    # A timed-out cell carries no figures.
    assert api_ids(client, clients="8") == csv_ids(client, clients="8") == set()
    # Filters combine: no ngram-mod result at four clients.
    assert api_ids(client, clients="4", method="ngram-mod") == set()
    assert api_ids(client, clients="4", method="draft-simple") == {load}


def test_the_best_shown_is_the_best_at_that_concurrency(pairs, client):
    (row,) = client.get("/api/pairs", {"clients": "4"}).json()["results"]
    assert row["best"]["speedup"] == 1.2  # not the single-client 2.0
    (row,) = client.get("/api/pairs", {"clients": "1", "q": "org/m2"}).json()["results"]
    assert row["best"]["speedup"] == 2.0
    body = b"".join(client.get("/pairs.csv", {"clients": "4"}).streaming_content).decode()
    (line,) = list(csv.DictReader(io.StringIO(body)))
    assert line["speedup"] == "1.200"


@pytest.mark.parametrize("junk", ["abc", "0", "-3", "1.5", "40000", ""])
def test_a_bad_clients_value_turns_the_filter_off(pairs, client, junk):
    tq = TableQuery.from_params(QueryDict(f"clients={junk}"))
    assert tq.clients is None and "clients" not in tq.params() and not tq.filters_results
    assert len(api_ids(client, clients=junk)) == 6


def test_the_clients_filter_travels_in_links_and_the_menu(pairs, client):
    tq = TableQuery.from_params(QueryDict("clients=4&sort=target"))
    assert tq.clients == 4 and tq.filters_results and tq.result_filters["clients"] == 4
    assert tq.params() == {"clients": "4", "sort": "target"}
    assert client.get("/api/pairs", {"clients": "4"}).json()["query"]["clients"] == 4
    facets = client.get("/api/pairs").json()["facets"]
    assert facets["clients"] == ["1", "4"]  # measured ones with figures: not the timed-out 8
    html = client.get("/", {"clients": "4"}).content.decode()
    assert '<select name="clients">' in html and "<option selected>4</option>" in html
    assert "clients=4" in html  # the CSV link keeps the filter
    assert "1 pair" in html


def test_load_figures_and_soaks_survive_an_export_and_import(pairs, tmp_path, settings, client):
    old = timezone.now() - timedelta(days=2)
    StabilityResult.objects.update(created_at=old)
    counts = export_kb(tmp_path / "kb.json")
    assert counts["results"] == 4 and counts["stability"] == 1
    doc = json.loads((tmp_path / "kb.json").read_text())
    assert doc["schema_version"] == "1.6"
    (soak,) = [s for r in doc["runs"] for s in r["stability"]]
    assert soak["intervals"] == INTERVALS and "deployment_ref" not in soak  # a local id names nothing elsewhere

    empty_installation(settings, "installation-b")
    report = import_kb(tmp_path / "kb.json")
    assert report.counts["measured results added"] == 4 and report.counts["stability results added"] == 1
    r = BenchmarkResult.objects.get(clients=4)
    assert {f: getattr(r, f) for f in LOAD} == LOAD and r.via == "server" and r.speedup == 1.2
    assert set(BenchmarkResult.objects.values_list("clients", flat=True)) == {1, 4, 8}
    s = StabilityResult.objects.get()
    assert s.run.origin_installation == HERE and s.pair == BenchmarkResult.objects.get(clients=4).pair
    assert (s.status, s.verdict, s.clients, s.parallel, s.planned_s, s.requests, s.errors) == (
        "stable",
        "stable for 2 min at 2 clients",
        2,
        2,
        120,
        23,
        1,
    )
    assert s.intervals == INTERVALS and s.options == [["--spec-ngram-mod-n-match", "24"]]
    assert (s.acceptance_min, s.acceptance_max, s.rss_end_mb, s.speedup) == (0.68, 0.7, 813.0, 1.2275)
    assert s.deployment_ref is None and s.finished_at is not None and s.created_at == old
    # The filter reads imported results the same way.
    assert api_ids(client, clients="4") == {s.pair_id}

    again = import_kb(tmp_path / "kb.json")
    assert "stability results added" not in again.counts and StabilityResult.objects.count() == 1


def test_a_soak_still_running_when_exported_arrives_interrupted(pairs, tmp_path, settings):
    StabilityResult.objects.update(status="running", finished_at=None)
    export_kb(tmp_path / "kb.json")
    empty_installation(settings, "installation-b")
    import_kb(tmp_path / "kb.json")
    assert StabilityResult.objects.get().status == "interrupted"


def older(doc: dict, version: str) -> dict:
    """The document as a specreg writing ``version`` wrote it: no load figures, no soaks (1.0: no base models)."""
    doc = json.loads(json.dumps(doc))
    doc["schema_version"] = version
    for run in doc["runs"]:
        run.pop("stability")
        for r in run["results"]:
            for f in ("clients", *LOAD):
                r.pop(f)
    if version == "1.0":
        for f in doc["files"]:
            f.pop("base_model")
    return doc


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_older_files_still_import_as_one_client_without_soaks(pairs, tmp_path, settings, version):
    export_kb(tmp_path / "kb.json")
    (tmp_path / "old.json").write_text(json.dumps(older(json.loads((tmp_path / "kb.json").read_text()), version)))
    empty_installation(settings, "installation-b")
    report = import_kb(tmp_path / "old.json")
    assert report.counts["measured results added"] == 4 and "stability results added" not in report.counts
    assert set(BenchmarkResult.objects.values_list("clients", "parallel", "latency_p95", "prompt_repeats")) == {
        (1, 1, None, False)
    }
    assert not StabilityResult.objects.exists()


def test_bad_soak_records_are_refused_and_nothing_is_stored(pairs, tmp_path, settings):
    export_kb(tmp_path / "kb.json")
    doc = json.loads((tmp_path / "kb.json").read_text())
    run = next(r for r in doc["runs"] if r["stability"])
    run["stability"][0]["intervals"][1]["tokens"] = "many"
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    empty_installation(settings, "installation-b")
    with pytest.raises(KBError, match=r"runs\.\d+\.stability\.0\.intervals\.1\.tokens"):
        import_kb(tmp_path / "bad.json")
    assert not GGUFFile.objects.exists() and not StabilityResult.objects.exists()


def test_the_schema_bounds_load_figures_and_soaks():
    result = {"k": 8, "n_predict": 64, "repeats": 1, "n_prompts": 4, "status": "ok"}
    assert schema.ResultIn.model_validate(result).clients == 1
    for bad in ({"clients": 0}, {"parallel": 40_000}, {"latency_p95": -1.0}, {"differing_share": 1.5}):
        with pytest.raises(ValidationError):
            schema.ResultIn.model_validate(result | bad)
    soak = {"k": 8, "planned_s": 60, "status": "stable"}
    assert schema.StabilityIn.model_validate(soak | {"intervals": INTERVALS}).intervals[1].differing == 1
    for bad in (
        {"intervals": [{"t": 1.0}] * (schema.MAX_INTERVALS + 1)},
        {"intervals": [{"requests": 1}]},  # no time
        {"intervals": [{"t": 1.0, "rss_mb": "lots"}]},
        {"status": "fine"},
        {"method": "rm -rf"},
        {"clients": 0},
    ):
        with pytest.raises(ValidationError):
            schema.StabilityIn.model_validate(soak | bad)
    run = {"installation": HERE, "id": 1, "target": "hf://a/b/c.gguf", "draft": "hf://a/b/d.gguf", "status": "done"}
    run["created_at"] = "2026-01-01T00:00:00+00:00"
    with pytest.raises(ValidationError):
        schema.RunIn.model_validate(run | {"stability": [soak] * (schema.MAX_SOAKS_PER_RUN + 1)})
