"""A benchmark picks its files: the form lists each base model's quants and takes p-min values, and a file llama.cpp
cannot load (a header alone) is refused before anything is queued, by the form, the shell and the API alike; a run
that failed offers nothing to deploy. Runs on SQLite and (db_service) again on PostgreSQL; no worker, no llama.cpp."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from gguf import GGUFValueType

from registry.catalog.pairing import pair_for
from registry.models import BenchmarkResult, BenchmarkRun, GGUFFile
from runner.runs.estimate import measured_speed
from tests.near_miss import rewrite
from tests.real_files import HEADER
from tests.registering import reg

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"


@pytest.fixture
def user_client(client):
    client.force_login(User.objects.create_user("ann", password="x" * 12))
    return client


def form(target: GGUFFile, draft: GGUFFile, **extra) -> dict:
    return {
        "target_file": target.pk, "draft_file": draft.pk, "ks": "4", "p_mins": "0", "temperatures": "0",
        "repeats": 1, "n_predict": 32, "prompts_per_type": 1, **extra,
    }  # fmt: skip


def options(page: str, name: str) -> list[tuple[str, str, bool]]:
    """(value, text, selected) of each option of the select ``name``."""
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', page, re.S)
    assert select, f"no select named {name}"
    return [
        (m.group(2), html.unescape(m.group(3)).strip(), "selected" in m.group(1))
        for m in re.finditer(r'<option([^>]*value="(\d+)"[^>]*)>(.*?)</option>', select.group(1), re.S)
    ]


def test_the_form_lists_each_models_quants_and_takes_p_min_values(user_client, smol, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    whole, header, pair = smol["whole"], smol["header"], smol["pair"]
    page = user_client.get(f"/pairs/{pair.pk}/benchmark").content.decode()
    for name in ("target_file", "draft_file"):
        listed = options(page, name)
        assert [v for v, _, _ in listed] == [str(whole.pk), str(header.pk)]  # the pair's own first
        assert [v for v, _, chosen in listed if chosen] == [str(whole.pk)]
        assert "Q4_1" in listed[0][1] and "llama.cpp cannot load it" in listed[1][1]
    assert re.search(r'<input type="text" name="p_mins" value="0,0.75"', page)
    r = user_client.post(f"/pairs/{pair.pk}/benchmark", form(whole, whole, p_mins="0.5, 0.9"))
    run = BenchmarkRun.objects.get()
    assert r.status_code == 302 and run.params["p_mins"] == [0.5, 0.9]
    assert (run.target_file, run.draft_file) == (whole, whole)


def test_a_header_alone_is_refused_before_queueing_by_the_form_the_shell_and_the_api(
    user_client, smol, header_path, settings
):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    whole, header, pair = smol["whole"], smol["header"], smol["pair"]
    why = f"hf://{SMOL}/{HEADER}: llama.cpp cannot load it: it has no tensors"
    for target, draft in ((header, whole), (whole, header)):
        r = user_client.post(f"/pairs/{pair.pk}/benchmark", form(target, draft))
        page = r.content.decode()
        error = re.search(r'<p class="error" id="benchmark-error">(.*?)</p>', page, re.S)
        assert r.status_code == 400 and error and why in html.unescape(error.group(1))
        assert "\n" not in error.group(1)  # one line
    # An n-gram method measures the target alone: a draft that is only a header is no obstacle.
    assert user_client.post(f"/pairs/{pair.pk}/benchmark", form(whole, header, method="ngram-mod")).status_code == 302
    assert BenchmarkRun.objects.count() == 1
    with pytest.raises(CommandError, match="llama.cpp cannot load it: it has no tensors"):
        call_command("run_benchmark", str(header_path))
    # The API queues predictions of a pair's own files: a model whose only file is a header alone is refused.
    other = rewrite(
        header_path, header_path.parent / "other.gguf", kv={"general.basename": ("Other", GGUFValueType.STRING)}
    )
    own = pair_for(*[reg(other, SMOL, "Other-135M.Q8_0.gguf")] * 2)
    assert own.target.info["n_tensors"] == 0
    r = user_client.post(f"/api/pairs/{own.pk}/predict", {}, content_type="application/json")
    assert r.status_code == 400 and "Other-135M.Q8_0.gguf: llama.cpp cannot load it" in r.json()["error"]
    assert BenchmarkRun.objects.count() == 1


def test_a_failed_run_offers_no_command_to_deploy(user_client, smol):
    pair = smol["pair"]
    plain = "llama-server -m models/SmolLM2-135M-Instruct.Q8_0.gguf --host 127.0.0.1 --port 8080"
    failed = BenchmarkRun.objects.create(
        pair=pair, queue="bench.x", status=BenchmarkRun.FAILED, error="tensor 'token_embd.weight' not found",
        server_command=plain, systemd_unit=f"[Service]\nExecStart={plain}\n", report_md="# failed\n",
    )  # fmt: skip
    page = user_client.get(f"/runs/{failed.pk}/").content.decode()
    assert "tensor 'token_embd.weight' not found" in html.unescape(page)
    assert "llama-server -m" not in page and 'id="record-deployed"' not in page and ">Deploy<" not in page
    assert user_client.get(f"/api/runs/{failed.pk}").json()["server_command"] == ""
    for name in ("unit", "command"):
        assert user_client.get(f"/runs/{failed.pk}/{name}").status_code == 404
    done = BenchmarkRun.objects.create(pair=pair, queue="bench.x", status=BenchmarkRun.DONE, server_command=plain)
    page = user_client.get(f"/runs/{done.pk}/").content.decode()
    assert "llama-server -m" in page and 'id="record-deployed"' in page


def test_the_form_estimates_the_time_from_the_runs_the_hardware_class_finished(user_client, smol, monkeypatch):
    monkeypatch.setenv("SPECREG_HARDWARE_CLASS", "cpu-est")  # this server's worker class
    whole, header, pair = smol["whole"], smol["header"], smol["pair"]
    url = f"/pairs/{pair.pk}/benchmark"

    def estimate(r) -> str:
        return html.unescape(re.search(r'<p id="benchmark-estimate"[^>]*>(.*?)</p>', r.content.decode(), re.S)[1])

    assert estimate(user_client.get(url)) == "No estimate: nothing of this target has been measured on cpu-est yet."
    run = BenchmarkRun.objects.create(
        pair=pair, target_file=whole, draft_file=whole, queue="bench.cpu-est", hardware_class="cpu-est",
        status=BenchmarkRun.DONE, summary={"elapsed_s": 64.0},
    )  # fmt: skip
    BenchmarkResult.objects.create(
        run=run, pair=pair, k=4, content_type="code", n_predict=64, repeats=2, n_prompts=1, status="ok"
    )  # a plain and a speculative process, 2 repeats, 64 tokens each, in 64 s: 0.25 s a token
    speed = measured_speed(whole, "cpu-est")
    assert speed is not None and speed.seconds_per_token == 0.25 and not speed.lower_bound
    assert estimate(user_client.get(url)).startswith("Estimate: about ")
    # What was sent, estimated even when the form refuses it for another reason (a header alone): K 4, 8, 16 and the
    # 24 a sweep may extend to, at one p-min, for one content type, prompt and repeat, a plain and a speculative
    # process each of 32 tokens at 0.25 s: 64 s; predicted first, the best 2 settings are measured: 32 s.
    r = user_client.post(url, form(whole, header, ks="4,8,16", content_types=["code"]))
    assert r.status_code == 400 and not BenchmarkRun.objects.filter(status="queued").exists()
    assert estimate(r) == (
        "Estimate: about 32 s plus the prediction when every setting is predicted first and the best 2 per content "
        "type measured; about 64 s to measure every setting. From 1 finished run of this target on cpu-est "
        f"(#{run.pk})."
    )
    r = user_client.post(url, form(whole, whole, ks="4", p_mins="0", content_types=["code"], full_sweep="on"))
    assert r.status_code == 302  # queued; the sentence for a full sweep alone:
    r = user_client.post(url, form(whole, header, ks="16,24", content_types=["code"], full_sweep="on"))
    assert estimate(r) == (
        f"Estimate: about 32 s to measure every setting, from 1 finished run of this target on cpu-est (#{run.pk})."
    )
    r = user_client.post(url, form(whole, whole, repeats=0))  # not a run: no estimate rather than the defaults'
    assert r.status_code == 400 and estimate(r) == "No estimate for these values."
