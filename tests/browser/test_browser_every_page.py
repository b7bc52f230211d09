"""Every page, logged out and logged in as staff, in headless Chromium: no console error, no failed request."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from inspector.info import inspect_source
from registry.catalog.registration import register
from registry.models import (
    BenchmarkResult,
    BenchmarkRun,
    Crawl,
    CrawlRepo,
    HubJob,
    Pair,
    PredictedResult,
    StabilityResult,
)
from registry.results.figures import refresh_predicted
from registry.team.models import Deployment, Note
from tests.browser.chromium import shot
from tests.runs import recommending_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct horse battery staple"
Q05 = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
Q15 = "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"


@pytest.fixture
def site(qwen05_header_path, qwen15_header_path) -> dict[str, int]:
    for path, repo, name in (
        (qwen05_header_path, Q05, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        (qwen15_header_path, Q15, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
    ):
        register(inspect_source(str(path)), source=f"hf://{repo}/{name}", repo=repo, path=name, etag=name, size=1)
    pair = Pair.objects.get()
    run = recommending_run(pair)
    predicted = BenchmarkRun.objects.create(
        pair=pair,
        queue="bench.cpu-2c",
        hardware_class="cpu-2c",
        status=BenchmarkRun.DONE,
        kind="predict",
        params={"mode": "predict"},
        summary={"prediction": {"cost_model": {"target": {"model": "t.gguf", "depth": 256, "seconds": [0.03, 0.05]}}}},
    )
    PredictedResult.objects.create(
        run=predicted, pair=pair, k=4, content_type="code", acceptance=0.8, speedup=1.2, n_predict=96, n_prompts=2
    )
    refresh_predicted(pair)
    job = HubJob.objects.create(kind=HubJob.IMPORT_REPO, params={"repo": Q05}, queue="specreg", status=HubJob.DONE)
    crawl = Crawl.objects.create(
        by="author", query="Qwen", max_repos=100, queue="crawl", status="running", started_at=timezone.now()
    )
    for repo, status, message in (
        (Q05, "done", ""),
        (Q15, "running", ""),
        ("Qwen/Broken-GGUF", "failed", "no .gguf files"),
    ):
        CrawlRepo.objects.create(
            crawl=crawl, repo_id=repo, status=status, message=message, added=1 if status == "done" else 0
        )
    # under load and a soak: the pair page's load cells and plot, the soak's run page and records
    BenchmarkResult.objects.create(
        run=run, pair=pair, k=4, content_type="code", speedup=0.9, acceptance=0.7, tokens_per_second=40.0,
        baseline_tokens_per_second=44.0, n_predict=64, repeats=1, n_prompts=2, status="ok", clients=2, parallel=2,
        latency_p50=1.1, latency_p95=1.4, baseline_latency_p95=1.2, ttft_p50=0.2, differing_share=0.5, via="server",
    )  # fmt: skip
    soak = BenchmarkRun.objects.create(
        pair=pair, queue="bench.cpu-2c", status=BenchmarkRun.DONE, kind="soak",
        params={"mode": "soak", "soak": {"duration_s": 120, "interval_s": 60, "clients": 1, "method": "draft-simple",
                                         "k": 4, "basis": "as asked"}},
    )  # fmt: skip
    StabilityResult.objects.create(
        run=soak, pair=pair, k=4, method="draft-simple", planned_s=120, elapsed_s=120, status="stable",
        verdict="stable for 2 min at 1 client: 0 errors, memory +0%", rss_start_mb=300, rss_end_mb=301,
        intervals=[{"t": 60.0, "requests": 30, "tokens": 900, "tokens_per_second": 15.0, "acceptance": 0.8,
                    "rss_mb": 300.0, "errors": 0, "timeouts": 0, "compared": 30, "differing": 0},
                   {"t": 120.0, "requests": 31, "tokens": 930, "tokens_per_second": 15.5, "acceptance": 0.82,
                    "rss_mb": 301.0, "errors": 0, "timeouts": 0, "compared": 31, "differing": 1}],
    )  # fmt: skip
    Note.objects.create(pair=pair, body="K=4 held up.", author_name="sam")
    dep = Deployment.objects.create(
        target=pair.target,
        draft=pair.draft,
        pair=pair,
        method="draft-simple",
        k=4,
        command="llama-server -m t.gguf -md d.gguf",
        author_name="sam",
        deployed_at=timezone.now(),
    )
    return {
        "pair": pair.pk,
        "model": pair.target.model_id,
        "run": run.pk,
        "job": job.pk,
        "crawl": crawl.pk,
        "deployment": dep.pk,
        "note": Note.objects.get().pk,
        "prediction": predicted.pk,
        "soak": soak.pk,
    }


def pages(ids: dict[str, int], staff: bool) -> list[str]:
    out = [
        "/",
        "/check/",
        "/local/",
        "/accounts/login/",
        f"/pairs/{ids['pair']}/",
        f"/models/{ids['model']}/",
        f"/runs/{ids['run']}/",
        f"/runs/{ids['prediction']}/",
        f"/runs/{ids['soak']}/",
        "/hardware/cpu-2c/",
        f"/jobs/{ids['job']}/",
        "/crawls/",
        f"/crawls/{ids['crawl']}/",
        f"/deployments/{ids['deployment']}/",
        "/api/docs/",
    ]
    if staff:
        out += [
            "/import/",
            f"/pairs/{ids['pair']}/benchmark",
            f"/deployments/new?pair={ids['pair']}",
            "/accounts/tokens/",
            f"/notes/{ids['note']}/",
            "/admin/",
            "/admin/registry/pair/",
            f"/admin/registry/pair/{ids['pair']}/change/",
        ]
    return out


def aborted_favicon(request) -> bool:
    # Chromium fetches the icon after the page's load, outside networkidle's reckoning, and drops that
    # fetch when the next page is opened (net::ERR_ABORTED, seen once in CI). A missing icon still fails
    # the test: it answers 404, which the response handler reports.
    return request.url.endswith("/favicon.svg") and "ERR_ABORTED" in (request.failure or "")


def visit_all(page, base: str, urls: list[str], label: str) -> list[str]:
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on(
        "requestfailed",
        lambda r: None if aborted_favicon(r) else problems.append(f"request failed: {r.url} ({r.failure})"),
    )
    page.on("response", lambda r: problems.append(f"{r.status} for {r.url}") if r.status >= 400 else None)
    for url in urls:
        before = len(problems)
        page.goto(base + url, wait_until="networkidle")
        problems[before:] = [f"{url}: {p}" for p in problems[before:]]
    shot(page, f"every-page-{label}")
    return problems


def test_every_page_loads_without_console_errors_or_failed_requests(page, live_server, site):
    assert visit_all(page, live_server.url, pages(site, staff=False), "anonymous") == []
    User.objects.create_user("sam", password=PASSWORD, is_staff=True, is_superuser=True)
    page.goto(f"{live_server.url}/accounts/login/?next=/")
    page.fill("input[name=username]", "sam")
    page.fill("input[name=password]", PASSWORD)
    page.click("main button")
    page.wait_for_url(f"{live_server.url}/")
    assert visit_all(page, live_server.url, pages(site, staff=True), "staff") == []


def test_the_benchmark_form_puts_each_tick_beside_its_own_label(page, live_server, site):
    User.objects.create_user("sam", password=PASSWORD, is_staff=True)
    page.goto(f"{live_server.url}/accounts/login/?next=/pairs/{site['pair']}/benchmark")
    page.fill("input[name=username]", "sam")
    page.fill("input[name=password]", PASSWORD)
    page.click("main button")
    page.wait_for_selector("#benchmark-form fieldset.checks")
    for label in page.locator("#benchmark-form fieldset.checks label.check").all():
        box, tick = label.bounding_box(), label.locator("input").bounding_box()
        assert box and tick and abs((tick["y"] + tick["height"] / 2) - (box["y"] + box["height"] / 2)) < 4
        assert tick["x"] < box["x"] + 8  # the tick first, then its text on the same line
    shot(page, "benchmark-form")
