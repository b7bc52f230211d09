"""Under load: several clients at once against a plain and a speculative llama-server of -np slots, with
real llama.cpp and SmolLM2-135M drafting for itself; the figures on the pair page, in the API and in the deployed
command (-np as measured)."""

from __future__ import annotations

import shlex
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from inspector.llama_flags import pinned_server_capabilities
from registry.models import BenchmarkResult, BenchmarkRun
from registry.results.deploy import deployment
from runner.llama import binaries as llamacpp
from runner.llama import procs
from runner.measure.cli import Cell, measure_cell
from runner.measure.load import percentile, round_prompts
from tests.needs import missing

PROMPTS = (
    "Count from 1 to 40: 1, 2, 3, 4, 5,",
    "Count down from 50: 50, 49, 48, 47,",
    "Count the even numbers: 2, 4, 6, 8,",
    "Count in fives: 5, 10, 15, 20,",
)


@pytest.fixture(scope="module")
def smollm2(smollm2_path) -> str:
    try:
        llamacpp.find_binary(llamacpp.SERVER)
    except llamacpp.LlamaCppNotFound as exc:
        missing(str(exc))
    return str(smollm2_path)


def test_rounds_send_distinct_prompts_while_they_last():
    assert round_prompts(4, 2, 0) == [0, 1] and round_prompts(4, 2, 1) == [2, 3] and round_prompts(4, 2, 2) == [0, 1]
    assert round_prompts(3, 4, 0) == [0, 1, 2, 0]  # more clients than prompts: one repeats (labelled)
    assert percentile([3.0, 1.0, 2.0, 10.0], 50) == 2.0 and percentile([3.0, 1.0, 2.0, 10.0], 95) == 10.0
    assert percentile([], 95) is None


def test_the_deployed_command_names_the_measured_slots_each_with_one_requests_context():
    caps = pinned_server_capabilities()
    argv = shlex.split(deployment(caps, "models/t.gguf", "models/d.gguf", 4, ctx_size=2048, parallel=4).command)
    assert argv[argv.index("-np") + 1] == "4" and argv[argv.index("-c") + 1] == "8192"
    one = shlex.split(deployment(caps, "models/t.gguf", None, None, ctx_size=2048, parallel=1).command)
    assert one[one.index("-np") + 1] == "1" and one[one.index("-c") + 1] == "2048"
    assert "-np" not in deployment(caps, "models/t.gguf", None, None).command  # nothing measured: llama's own


@pytest.mark.llama
def test_two_clients_at_once_give_aggregate_speeds_latencies_and_the_identity_share(smollm2):
    progress: list[str] = []
    res = measure_cell(
        Cell(smollm2, smollm2, 4, PROMPTS, n_predict=24, repeats=2, via="server", clients=2),
        progress=lambda f, m: progress.append(m),
    )
    assert res.status == "ok", res.error
    load = res.load
    assert load is not None and (res.cell.clients, res.cell.slots) == (2, 2) and not load.prompt_repeats
    # A B per round, two requests each, distinct prompts in every round
    assert [(r.kind, r.prompt_index) for r in res.runs] == [
        ("plain", 0), ("plain", 1), ("spec", 0), ("spec", 1), ("plain", 2), ("plain", 3), ("spec", 2), ("spec", 3),
    ]  # fmt: skip
    assert load.plain_aggregate.n == 2 and load.spec_aggregate.n == 2
    assert res.speedup == pytest.approx(load.spec_aggregate.median / load.plain_aggregate.median)
    assert res.spec.median == load.spec_aggregate.median  # speeds are aggregates under load
    assert 0 < load.latency_p50 <= load.latency_p95 and load.baseline_latency_p95 > 0
    assert 0 < load.ttft_p50 < load.latency_p95  # the first streamed token comes before the whole answer
    assert res.acceptance_rate >= 0.9 and res.identical is None  # several clients: identity is information only
    assert 0.0 <= load.differing_share <= 1.0
    assert all("2 clients" in m for m in progress)
    assert not procs._live_groups


@pytest.mark.llama
@pytest.mark.django_db(transaction=True)
def test_a_sweep_under_load_is_on_the_pair_page_the_api_and_the_deployed_command(smollm2):
    out = StringIO()
    call_command(
        "run_benchmark", smollm2, smollm2, "--methods", "draft-simple", "--k", "2,4", "--no-extend", "--p-min", "0",
        "--tasks", "json", "--n-predict", "24", "--repeats", "1", "--prompts-per-type", "1", "--via", "server",
        "--clients", "1,2", "--full-sweep", "--here", stdout=out,
    )  # fmt: skip
    run = BenchmarkRun.objects.get()
    assert run.status == "done", run.error
    one = list(run.results.filter(clients=1))
    two = list(run.results.filter(clients=2))
    assert sorted(r.k for r in one) == [2, 4]  # the sweep at one client
    assert 1 <= len(two) <= 2 and all(r.parallel == 2 and r.latency_p95 and r.ttft_p50 for r in two)
    assert all(r.n_prompts >= 2 for r in two)  # as many distinct prompts as clients
    assert "×2 clients" in out.getvalue()
    # deployed = measured: the command holds for the largest concurrency measured, with its slots
    argv = shlex.split(run.server_command)
    assert argv[argv.index("-np") + 1] == "2" and run.summary["deploy_clients"] == 2
    client = Client()
    page = client.get(run.pair.get_absolute_url()).content.decode()
    assert 'id="load-cells"' in page and "against concurrent clients" in page
    api = client.get(f"/api/pairs/{run.pair_id}").json()
    loaded = [m for m in api["measured"] if m["clients"] == 2]
    assert loaded and all(m["load"]["parallel"] == 2 and m["load"]["latency_p95"] > 0 for m in loaded)
    state = client.get(f"/api/runs/{run.pk}").json()
    assert {r["clients"] for r in state["results"]} == {1, 2}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--via", "server", "--clients", "0"], "clients must be between 1 and 16"),
        (["--clients", "2"], "several clients are measured through llama-server: add --via server"),
        (["--via", "server", "--clients", "2", "--parallel", "0"], "parallel (-np) must be between 1 and 16"),
    ],
)
def test_bad_concurrency_gets_one_line(smollm2_path, args, message):
    from inspector.management.base import UserError

    m = str(smollm2_path)
    with pytest.raises(UserError) as err:
        call_command("run_benchmark", m, m, "--methods", "draft-simple", *args, stdout=StringIO())
    assert str(err.value) == message or str(err.value).startswith(message)
    assert "\n" not in str(err.value) and not BenchmarkResult.objects.exists()
