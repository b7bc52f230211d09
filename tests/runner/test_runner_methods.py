"""Speculation methods as a benchmark dimension: settings per method, the options of the pinned build, real
n-gram runs through run_benchmark (--here and --wait with a worker) and a llama-server deployed with one."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from io import StringIO

import pytest
from django.core.management import call_command

from inspector.llama_flags import PINNED_SERVER_HELP, parse_help, pinned_server_capabilities
from inspector.spec_flags import NGRAM_SWEEP, Setting, spec_flags
from registry.models import BenchmarkRun, Pair
from registry.results.deploy import deployment
from runner.errors import BenchmarkError
from runner.llama import binaries as llamacpp
from runner.methods import MAX_SETTINGS, default_methods, settings_for
from runner.runs.params import normalize_params
from tests.local_servers import Server, free_port

ROW = re.compile(
    r"^edit\s+0\.0\s+(ngram-mod|ngram-map-k) K=\d+ \S+\s+[\d.]+\s+[\d.]+\s+(\d+\.\d\dx|n/a)\s+"
    r"(\d+\.\d%|n/a)\s"
)


def test_every_ngram_setting_uses_options_the_pinned_build_has_and_stays_within_six():
    caps = pinned_server_capabilities()
    for method in (*NGRAM_SWEEP, "ngram-cache"):
        settings = settings_for(method, [4, 8, 16], [0.0, 0.75])
        assert 1 <= len(settings) <= MAX_SETTINGS
        assert len({s.label for s in settings}) == len(settings)
        for s in settings:
            argv = spec_flags(caps, s)
            assert argv[:2] == ["--spec-type", method]
            assert all(caps.has(a) for a in argv if a.startswith("--")), argv
    # draft models and MTP heads: each K at each p-min
    assert [s.label for s in settings_for("draft-mtp", [4, 8], [0.0, 0.75])] == [
        "draft-mtp K=4 p-min=0",
        "draft-mtp K=8 p-min=0",
        "draft-mtp K=4 p-min=0.75",
        "draft-mtp K=8 p-min=0.75",
    ]


def test_the_ngram_lengths_are_the_options_of_the_pinned_help():
    # every n-gram option named here is an option of the pinned build (its --help, kept in the repository)
    names = {n for o in parse_help(PINNED_SERVER_HELP.read_text()) for n in o.names}
    for length_flag, _, other, _ in NGRAM_SWEEP.values():
        assert length_flag in names and other in names


def test_the_default_methods_and_refusals():
    assert default_methods(None, False)[:1] == ["ngram-simple"] and "draft-simple" not in default_methods(None, False)
    assert default_methods(None, True)[0] == "draft-mtp"
    assert default_methods("draft-eagle3", False)[0] == "draft-eagle3" and "ngram-mod" in default_methods("x", False)
    with pytest.raises(BenchmarkError, match="needs a draft file"):
        normalize_params({"methods": ["draft-simple"], "target_alone": True})
    with pytest.raises(BenchmarkError, match="unknown speculation method 'ngram-fast'"):
        normalize_params({"methods": ["ngram-fast"]})
    with pytest.raises(BenchmarkError, match=r"p-min must lie in \[0, 1\]"):
        normalize_params({"p_mins": [0.5, 2]})


def test_the_deployed_command_uses_the_methods_flags():
    caps = pinned_server_capabilities()
    mtp = deployment(caps, "models/t.gguf", None, None, setting=Setting("draft-mtp", 3, 0.75))
    assert "-md" not in mtp.argv and " --spec-type draft-mtp" in mtp.command
    assert "--spec-draft-n-max 3" in mtp.command and "--spec-draft-p-min 0.75" in mtp.command
    eagle = deployment(caps, "models/t.gguf", "models/eagle.gguf", None, setting=Setting("draft-eagle3", 4))
    assert "-md models/eagle.gguf" in eagle.command and eagle.command.endswith("--spec-type draft-eagle3")
    ngram = deployment(
        caps,
        "models/t.gguf",
        "models/t.gguf",
        None,
        setting=Setting("ngram-map-k", 8, None, (("--spec-ngram-map-k-size-n", "6"),)),
    )
    assert "-md" not in ngram.argv and "--spec-ngram-map-k-size-m 8 --spec-ngram-map-k-size-n 6" in ngram.command
    assert "ExecStart=llama-server" in ngram.unit


@pytest.mark.llama
def test_the_speculative_tool_accepts_every_method_setting_and_runs_ngram_without_a_draft(smollm2_path, tmp_path):
    caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.SPECULATIVE))
    gen = llamacpp.GenParams(16)
    mtp = llamacpp.method_argv(caps, "t.gguf", None, "p", gen, Setting("draft-mtp", 4, 0.75))
    assert "-md" not in mtp and mtp[-2:] == ["--spec-type", "draft-mtp"]
    with pytest.raises(llamacpp.LlamaCppError, match="needs a draft file"):
        llamacpp.method_argv(caps, "t.gguf", None, "p", gen, Setting("draft-dflash", 4))
    argv = llamacpp.method_argv(
        caps,
        str(smollm2_path),
        None,
        "def add(a, b):\n    return a + b\n" * 6,
        gen,
        Setting("ngram-mod", 8, None, (("--spec-ngram-mod-n-match", "16"),)),
    )
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "adding speculative implementation 'ngram-mod'" in out.stderr


@pytest.mark.llama
@pytest.mark.django_db(transaction=True)
def test_run_benchmark_target_alone_here_prints_one_line_per_method_and_setting(smollm2_path):
    out = StringIO()
    call_command(
        "run_benchmark",
        str(smollm2_path),
        "--methods",
        "ngram-mod,ngram-map-k",
        "--tasks",
        "edit",
        "--here",
        "--repeats",
        "1",
        "--n-predict",
        "48",
        "--prompts-per-type",
        "1",
        "--full-sweep",
        stdout=out,
    )
    text = out.getvalue()
    rows = [line for line in text.splitlines() if ROW.match(line)]
    assert len(rows) == 12, text  # 6 settings of each method
    assert {ROW.match(r).group(1) for r in rows} == {"ngram-mod", "ngram-map-k"}
    run = BenchmarkRun.objects.get()
    assert run.status == "done" and run.params["target_alone"] and run.pair.target_id == run.pair.draft_id
    assert {r.method for r in run.results.all()} == {"ngram-mod", "ngram-map-k"}
    assert any(r.drafted > 0 for r in run.results.all())  # edit prompts repeat their input: n-grams find it
    rec = run.summary["recommendations"][0]
    assert "recommended for edit at temperature 0.0" in text
    if rec["k"]:
        assert rec["method"] in ("ngram-mod", "ngram-map-k") and f"--spec-type {rec['method']}" in run.server_command
        assert "-md" not in run.server_command
        pair = Pair.objects.get(pk=run.pair_id)
        assert pair.best_method == rec["method"] or pair.best_speedup <= 1


@pytest.mark.llama
@pytest.mark.django_db(transaction=True)
def test_run_benchmark_via_server_measures_through_llama_server_and_records_it(smollm2_path):
    out = StringIO()
    call_command(
        "run_benchmark",
        str(smollm2_path),
        "--methods",
        "ngram-map-k",
        "--tasks",
        "edit",
        "--here",
        "--via",
        "server",
        "--repeats",
        "1",
        "--n-predict",
        "48",
        "--prompts-per-type",
        "1",
        "--full-sweep",
        stdout=out,
    )
    text = out.getvalue()
    assert "through llama-server" in text.splitlines()[1], text
    rows = [line for line in text.splitlines() if ROW.match(line)]
    assert len(rows) == 6 and all("ngram-map-k K=" in r for r in rows), text
    run = BenchmarkRun.objects.get()
    assert run.status == "done" and run.params["via"] == "server"
    assert {r.via for r in run.results.all()} == {"server"}
    assert any(r.drafted > 0 for r in run.results.all())  # from the responses' timings.draft_n


@pytest.mark.llama
@pytest.mark.broker
def test_run_benchmark_target_alone_waits_for_a_worker(celery_worker_process, smollm2_path):
    out = StringIO()
    call_command(
        "run_benchmark",
        str(smollm2_path),
        "--methods",
        "ngram-mod,ngram-map-k",
        "--tasks",
        "edit",
        "--wait",
        "--hardware",
        "cpu-test",
        "--repeats",
        "1",
        "--n-predict",
        "16",
        "--prompts-per-type",
        "1",
        "--timeout",
        "900",
        stdout=out,
        stderr=StringIO(),
    )
    rows = [line for line in out.getvalue().splitlines() if ROW.match(line)]
    # the worker predicts the 6 settings of each method first, then measures the best two
    assert len(rows) == 2 and "predicted 12 setting(s) first" in out.getvalue(), out.getvalue()
    assert {ROW.match(r).group(1) for r in rows} <= {"ngram-mod", "ngram-map-k"}
    assert "recommended for edit at temperature 0.0" in out.getvalue()


@pytest.mark.llama
def test_a_llama_server_with_an_ngram_method_drafts(smollm2_path, tmp_path):
    server = Server(smollm2_path, free_port(), tmp_path / "llama-server.log")
    caps = llamacpp.capabilities(server.binary)
    dep = deployment(
        caps,
        str(smollm2_path),
        None,
        None,
        setting=Setting("ngram-map-k", 8, None, (("--spec-ngram-map-k-size-n", "6"),)),
    )
    server.__class__ = type(
        "NgramServer",
        (Server,),
        {
            "argv": property(
                lambda s: [
                    str(s.binary),
                    *dep.argv[1 : dep.argv.index("--port")],
                    "--port",
                    str(s.port),
                    *dep.argv[dep.argv.index("--port") + 2 :],
                    "-np",
                    "1",
                    "-t",
                    "2",
                ]
            )
        },
    )
    server.start()
    try:
        text = "def add(a, b):\n    return a + b\n\n" * 8
        body = json.dumps(
            {
                "prompt": "Repeat exactly:\n" + text + "\nRepeated:\n",
                "n_predict": 64,
                "temperature": 0,
                "cache_prompt": False,
            }
        ).encode()
        req = urllib.request.Request(
            server.url + "/completion", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=120) as r:
            timings = json.load(r)["timings"]
    finally:
        server.stop()
    assert timings.get("draft_n", 0) > 0, timings


@pytest.mark.django_db
def test_draftless_results_show_as_the_method_in_the_table_the_csv_and_the_model_page(client, smollm2_path):
    from registry.catalog.pairing import pair_for
    from registry.hub.sources import register_source
    from registry.models import BenchmarkResult
    from registry.results.figures import refresh_best

    f = register_source(str(smollm2_path)).file
    own = pair_for(f, f)
    run = BenchmarkRun.objects.create(
        pair=own, queue="specreg", status=BenchmarkRun.DONE, params={"target_alone": True, "methods": ["ngram-mod"]}
    )
    for method, k, speedup in (("ngram-mod", 16, 1.17), ("ngram-map-k", 8, 1.33), ("ngram-mod", 64, 0.94)):
        BenchmarkResult.objects.create(
            run=run,
            pair=own,
            k=k,
            method=method,
            content_type="edit",
            acceptance=0.9,
            speedup=speedup,
            tokens_per_second=10 * speedup,
            baseline_tokens_per_second=10,
            n_predict=64,
            repeats=1,
            n_prompts=1,
            status="ok",
            hardware="test cpu",
            llama_cpp_build="b11434",
        )
    refresh_best(own)
    own.refresh_from_db()
    assert own.best_method == "ngram-map-k" and own.best_k == 8

    home = client.get("/").content.decode()
    assert "none (n-gram)" in home and "the target alone" in home and '<td class="method">ngram-map-k</td>' in home
    filtered = client.get("/", {"method": "ngram-mod"}).content.decode()
    assert '<td class="method">ngram-mod</td>' in filtered and "1.17" in filtered  # best *matching* result
    assert client.get("/", {"method": "draft-eagle3"}).content.decode().count('class="pair-link"') == 0
    rows = list(__import__("csv").reader(StringIO(b"".join(client.get("/pairs.csv").streaming_content).decode())))
    assert rows[0][-3:] == ["method", "state", "pair_url"] and rows[1][-3] == "ngram-map-k" and rows[1][-2] == "kv"
    api = client.get("/api/pairs").json()
    assert api["results"][0]["best"]["method"] == "ngram-map-k"

    page = client.get(f"/models/{f.model_id}/").content.decode()
    ways = page[page.index('id="ways"') : page.index('id="drafts"')]
    assert ways.index("ngram-map-k") < ways.index("ngram-mod")  # fastest first
    assert "none (n-gram)" in ways and "1.33" in ways and "1.17" in ways and "0.94" not in ways
