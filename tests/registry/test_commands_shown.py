"""Commands as a user can run them: one ``hf download`` per distinct file, naming the files the ``llama-server`` line
runs; a systemd unit that finds its models; no ``run_benchmark`` for a file llama.cpp cannot load; and /check/ warns
of a draft bigger than its target as the pair page does. SQLite and (db_service) PostgreSQL; no llama.cpp."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from inspector.info import inspect_source
from inspector.llama_flags import pinned_server_capabilities
from registry.catalog.pairing import pair_for
from registry.catalog.registration import register
from registry.hub.sources import register_source
from registry.models import BenchmarkResult, BenchmarkRun
from registry.results.deploy import deployment, model_path
from registry.results.figures import refresh_best
from tests.near_miss import rewrite
from tests.real_files import HEADER, WHOLE
from tests.registering import SMOL

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


def test_the_pair_page_downloads_each_file_its_command_runs_once(client, smol):
    header, pair = smol["header"], smol["pair"]
    # The run measured another quant than the pair's own (the target drafting for itself), and gained measurably.
    command = f"llama-server -m models/{HEADER} -md models/{HEADER} --spec-type draft-simple --spec-draft-n-max 4"
    run = BenchmarkRun.objects.create(
        pair=pair, target_file=header, draft_file=header, queue="bench.x", status=BenchmarkRun.DONE,
        server_command=command,
    )  # fmt: skip
    BenchmarkResult.objects.create(
        run=run, pair=pair, k=4, content_type="code", speedup=1.5, speedup_min=1.3, speedup_max=1.7, pairs=3,
        acceptance=0.8, tokens_per_second=30.0, baseline_tokens_per_second=20.0, n_predict=64, repeats=3,
        n_prompts=2, status="ok", other_cpu_share=0.0,
    )  # fmt: skip
    refresh_best(pair)
    page = client.get(pair.get_absolute_url()).content.decode()
    rec = page[page.index('id="recommendation"') :]
    shown = [html.unescape(p) for p in re.findall(r'<pre class="cmd"[^>]*>(.*?)</pre>', rec, re.S)]
    downloads, server = shown[0].splitlines(), shown[1]
    assert server == command
    assert downloads == [f"hf download {SMOL} --include {HEADER} --local-dir models"]  # once, the file it runs
    assert WHOLE not in shown[0]


def test_a_units_server_runs_where_its_relative_model_paths_lie(smollm2_path):
    f = register_source(str(smollm2_path)).file  # a local file: anonymous visitors see its name alone
    pair = pair_for(f, f)
    dep = deployment(pinned_server_capabilities(), model_path(f), model_path(f), 4)
    assert "\nWorkingDirectory=/srv/llama\n" in dep.unit
    run = BenchmarkRun.objects.create(
        pair=pair, queue="bench.x", status=BenchmarkRun.DONE, server_command=dep.command, systemd_unit=dep.unit
    )
    unit = Client().get(f"/runs/{run.pk}/unit").content.decode()
    assert f"ExecStart=llama-server -m {smollm2_path.name} " in unit  # relative for a stranger ...
    assert "\nWorkingDirectory=/srv/llama\n" in unit  # ... so the unit names the folder it runs in
    assert unit.index("WorkingDirectory=") < unit.index("ExecStart=")


def test_a_model_page_suggests_no_benchmark_of_a_file_llama_cpp_cannot_load(client, smol):
    whole, header = smol["whole"], smol["header"]
    page = client.get(header.get_absolute_url()).content.decode()
    ways = page[page.index('id="ways"') : page.index('id="drafts"')]
    assert "run_benchmark" not in ways
    assert "llama.cpp cannot load this file: it has no tensors, a header alone" in html.unescape(ways)
    data = page.split('id="data-complete"', 1)[1].split("</dd>", 1)[0]
    assert "none: the file lists no tensors" in data and "all inside the file" not in data
    page = client.get(whole.get_absolute_url()).content.decode()
    ways = page[page.index('id="ways"') : page.index('id="drafts"')]
    assert f'<code class="cmd">manage.py run_benchmark hf://{SMOL}/{WHOLE}</code>' in ways


def test_check_warns_of_a_draft_bigger_than_its_target_as_the_pair_page_does(
    client, qwen05_header_path, qwen15_header_path, tmp_path
):
    """Headers alone (no tensors, so no parameter count): their size labels say which model is bigger."""
    q = {}
    for key, path, repo in (
        ("q05", qwen05_header_path, "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"),
        ("q15", qwen15_header_path, "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"),
    ):
        info = inspect_source(str(rewrite(path, tmp_path / f"{key}.gguf", tensors=False)))
        assert info.parameter_count == 0
        name = f"{key}-q4_k_m.gguf"
        q[key] = register(info, source=f"hf://{repo}/{name}", repo=repo, path=name, etag=name, size=1).file
    reversed_pair = pair_for(q["q05"], q["q15"])  # asked for in this order: the 1.5B drafting for the 0.5B
    pair_page = html.unescape(client.get(reversed_pair.get_absolute_url()).content.decode())
    check = html.unescape(client.get("/check/", {"target": q["q05"].source, "draft": q["q15"].source}).content.decode())
    said = (
        "draft_not_smaller</strong>: The draft has 1,500,000,000 parameters (by its size label 1.5B), not fewer "
        "than the target's 500,000,000 (by its size label 0.5B): drafting cannot save time."
    )
    assert said in pair_page and said in check
