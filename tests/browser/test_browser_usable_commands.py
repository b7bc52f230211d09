"""The benchmark form, commands and result tables in headless Chromium at 1366 px: the form picks files, refuses a
header alone in one line, lines up its inputs and says how long it would take; every command has a copy button;
results tables stay inside their cards; a failed run offers nothing to deploy; /check/ warns of a reversed pair."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from inspector.info import inspect_source
from registry.catalog.pairing import pair_for
from registry.catalog.registration import register
from registry.models import BenchmarkResult, BenchmarkRun, PredictedResult
from registry.results.figures import refresh_best, refresh_predicted
from runner.models import CostMeasurement
from tests.browser.chromium import ARTIFACTS, shot
from tests.near_miss import rewrite
from tests.registering import reg

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"
SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
WHOLE, HEADER = "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q8_0.gguf"
# Settings as a sweep names them, the longest first: what made the results tables run past their cards.
SETTINGS = [
    ("ngram-map-k4v", 48, None, [["--spec-ngram-map-k4v-size-n", "12"]]),
    ("ngram-mod", 64, None, [["--spec-ngram-mod-n-match", "24"]]),
    ("draft-simple", 16, 0.75, []),
    ("draft-simple", 4, 0.0, []),
]


@pytest.fixture
def site(smollm2_path, tmp_path) -> dict:
    whole = reg(smollm2_path, SMOL, WHOLE)
    header = reg(rewrite(smollm2_path, tmp_path / HEADER, tensors=False), SMOL, HEADER)
    pair = pair_for(whole, whole)
    command = f"llama-server -m models/{WHOLE} -md models/{WHOLE} --spec-type draft-simple --spec-draft-n-max 16"
    done = BenchmarkRun.objects.create(
        pair=pair, target_file=whole, draft_file=whole, queue="bench.cpu-2c", hardware_class="cpu-2c",
        status=BenchmarkRun.DONE, server_command=command, summary={"elapsed_s": 900.0},
        params={"ks": [4, 16], "temperatures": [0.0], "repeats": 3, "n_predict": 128, "prompts_per_type": 2,
                "methods": ["draft-simple", "ngram-mod", "ngram-map-k4v"]},
    )  # fmt: skip
    predicted = BenchmarkRun.objects.create(
        pair=pair,
        queue="bench.cpu-2c",
        hardware_class="cpu-2c",
        status=BenchmarkRun.DONE,
        kind="predict",
        params={"mode": "predict"},
    )
    for i, (method, k, p_min, options) in enumerate(SETTINGS):
        for content in ("code", "prose"):
            BenchmarkResult.objects.create(
                run=done, pair=pair, method=method, k=k, p_min=p_min, options=options, content_type=content,
                speedup=1.42 - i * 0.1, speedup_min=1.3 - i * 0.1, speedup_max=1.5 - i * 0.1, pairs=3,
                acceptance=0.713, tokens_per_second=123.4, tps_min=120.1, tps_max=125.9,
                baseline_tokens_per_second=88.8, baseline_min=87.1, baseline_max=90.2, mean_accepted=3.21,
                n_predict=128, repeats=3, n_prompts=2, status="ok", identical=True, other_cpu_share=0.0,
                hardware="AMD EPYC 9R14 96-Core Processor, 2 cores", llama_cpp_build="b11434",
            )  # fmt: skip
            for run in (predicted, done):  # a prediction run (the pair page), the benchmark's own first step
                PredictedResult.objects.create(
                    run=run, pair=pair, method=method, k=k, p_min=p_min, options=options, content_type=content,
                    acceptance=0.7, speedup=1.35 - i * 0.1, drafted=240, accepted=171, near_ties=12, n_predict=128,
                    n_prompts=2, hardware="cpu-2c", llama_cpp_build="b11434",
                )  # fmt: skip
    refresh_best(pair)
    refresh_predicted(pair)
    failed = BenchmarkRun.objects.create(
        pair=pair, target_file=header, draft_file=header, queue="bench.cpu-2c", hardware_class="cpu-2c",
        status=BenchmarkRun.FAILED, error="llama.cpp: tensor 'token_embd.weight' not found",
        server_command=f"llama-server -m models/{HEADER} --host 127.0.0.1 --port 8080",
    )  # fmt: skip
    for n, model in enumerate(("SmolLM2-135M-Instruct.Q4_1.gguf", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")):
        CostMeasurement.objects.create(
            key=f"c{n}", model_sha256=f"{n}" * 64, model_name=model, model_size=1, build="11434.0.0",
            hardware_class="cpu-2c/avx512", host="worker-a.example.internal", threads=2, depth=256,
            data={"seconds": [0.0123, 0.0150, 0.0190, 0.0254], "sample_s": 0.000041}, seconds=41.0,
        )  # fmt: skip
    return {"whole": whole, "header": header, "pair": pair, "done": done, "failed": failed}


# How many lines an element's text takes: the distinct tops of its line boxes (a few pixels apart on one line).
LINES = """el => {
  const range = document.createRange(); range.selectNodeContents(el);
  const tops = [...range.getClientRects()].filter(r => r.width > 0).map(r => r.top).sort((a, b) => a - b);
  return tops.filter((t, i) => i === 0 || t - tops[i - 1] > 6).length;
}"""


def log_in(pg, base: str, then: str) -> None:
    User.objects.create_user("sam", password=PASSWORD)
    pg.goto(f"{base}/accounts/login/?next={then}")
    pg.fill("input[name=username]", "sam")
    pg.fill("input[name=password]", PASSWORD)
    pg.click("main button")
    pg.wait_for_url(f"{base}{then}")


def inside_its_card(pg, selector: str) -> None:
    """The element's right edge is not past its card's (what one sees scrolled or not: the card's own box)."""
    table = pg.locator(selector)
    card = pg.locator(f"{selector} >> xpath=ancestor::section[contains(@class,'card')][1]")
    t, c = table.bounding_box(), card.bounding_box()
    assert t and c and t["x"] + t["width"] <= c["x"] + c["width"] + 0.5, (selector, t, c)


def test_the_benchmark_form_picks_files_lines_up_and_estimates(page, live_server, site, monkeypatch):
    monkeypatch.setenv("SPECREG_HARDWARE_CLASS", "cpu-2c")  # this server's workers: the class the run above ran on
    url = f"/pairs/{site['pair'].pk}/benchmark"
    log_in(page, live_server.url, url)
    form = page.locator("#benchmark-form")
    target = form.locator("select[name=target_file]")
    assert target.input_value() == str(site["whole"].pk)
    assert "llama.cpp cannot load it" in form.locator("select[name=draft_file]").inner_text()
    assert form.locator("input[name=p_mins]").input_value() == "0,0.75"
    # Each row of a group: its inputs' tops on one line, their left edges on the columns.
    for group in form.locator("fieldset.group").all():
        tops = {}
        for field in group.locator("label.field").all():
            box = field.locator("input, select").first.bounding_box()
            row = round(field.bounding_box()["y"])
            tops.setdefault(row, set()).add(round(box["y"]))
        assert all(len(ys) == 1 for ys in tops.values()), tops
    estimate = page.locator("#benchmark-estimate")
    said = estimate.inner_text()
    assert said.startswith("Estimate: about ") and "finished run of this target on" in said
    page.fill("input[name=n_predict]", "128")  # the script says what the server said, for the same values
    assert estimate.inner_text() == said
    page.fill("input[name=n_predict]", "256")  # twice the tokens: twice the time
    assert estimate.inner_text() != said
    shot(page, "usable-benchmark-form")
    page.select_option("select[name=draft_file]", str(site["header"].pk))
    page.click("#benchmark-form button")
    page.wait_for_selector("#benchmark-error")
    error = page.locator("#benchmark-error")
    assert f"{HEADER}: llama.cpp cannot load it: it has no tensors" in error.inner_text()
    assert error.bounding_box()["height"] < 50  # one line (two at most where the source is long)
    shot(page, "usable-benchmark-refused")
    assert BenchmarkRun.objects.filter(status="queued").count() == 0


def test_commands_have_copy_buttons_and_tables_stay_in_their_cards(page, live_server, site):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    log_in(page, live_server.url, f"/runs/{site['done'].pk}/")
    inside_its_card(page, "table.results >> nth=0")
    inside_its_card(page, "#predictions table.results")
    box = page.locator("pre.cmd").first
    button = box.locator("xpath=following-sibling::button[contains(@class,'copy')]")
    assert button.count() == 1
    b, p = button.bounding_box(), box.bounding_box()
    assert p["x"] <= b["x"] and b["x"] + b["width"] <= p["x"] + p["width"]  # beside it, inside its box
    button.click()
    button.filter(has_text="Copied").wait_for()  # no wait_for_function: the site's CSP forbids eval
    assert page.evaluate("navigator.clipboard.readText()") == site["done"].server_command
    shot(page, "usable-run-page")

    page.goto(f"{live_server.url}/runs/{site['failed'].pk}/")
    assert "tensor 'token_embd.weight' not found" in page.inner_text("#run-error")
    assert page.locator("#record-deployed").count() == 0 and page.locator("pre.cmd").count() == 0
    assert "llama-server -m" not in page.inner_text("main")
    shot(page, "usable-failed-run")

    page.goto(f"{live_server.url}/hardware/cpu-2c/")
    inside_its_card(page, "#cost-table")
    shot(page, "usable-hardware-page")

    page.goto(f"{live_server.url}{site['pair'].get_absolute_url()}")
    commands = page.locator("#recommendation pre.cmd")
    assert commands.count() == 2 and page.locator("#recommendation button.copy").count() == 2
    # The "Predicted here" settings: each on at most two lines (the setting, then its near-ties).
    for cell in page.locator("#predicted-table tbody tr td:nth-child(2)").all():
        assert cell.evaluate(LINES) <= 2, cell.inner_text()
    inside_its_card(page, "#predicted-table")
    shot(page, "usable-pair-page")
    for section in ("recommendation", "predicted"):  # the parts this test is about, at full size
        page.locator(f"#{section}").screenshot(path=str(ARTIFACTS / f"usable-pair-{section}.png"))


def test_check_warns_of_a_reversed_pair(page, live_server, qwen05_header_path, qwen15_header_path, tmp_path):
    sources = []
    for key, path, repo in (
        ("q05", qwen05_header_path, "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"),
        ("q15", qwen15_header_path, "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"),
    ):
        info = inspect_source(str(rewrite(path, tmp_path / f"{key}.gguf", tensors=False)))
        name = f"{key}-q4_k_m.gguf"
        sources.append(register(info, source=f"hf://{repo}/{name}", repo=repo, path=name, etag=name, size=1).file)
    page.goto(f"{live_server.url}/check/")
    page.fill("input[name=target]", sources[0].source)  # the 0.5B as the target, the 1.5B as its draft
    page.fill("input[name=draft]", sources[1].source)
    page.click("#check-form button")
    page.wait_for_selector("#check-result")
    warnings = page.inner_text("#check-result ul.warnings")
    assert "draft_not_smaller" in warnings and "not fewer than the target's 500,000,000" in warnings
    shot(page, "usable-check-reversed")
    # A header alone: its model page suggests no run_benchmark, and says why.
    page.goto(f"{live_server.url}{sources[0].get_absolute_url()}")
    ways = page.inner_text("#ways")
    assert "run_benchmark" not in ways and "llama.cpp cannot load this file: it has no tensors" in ways
    shot(page, "usable-model-header-alone")
