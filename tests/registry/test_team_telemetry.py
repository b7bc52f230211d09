"""Production telemetry against a real llama-server started with --metrics (SmolLM2 drafting for itself):
real completions, scrapes that record acceptance, a restart (counters reset), an unreachable server, and
servers that answer too much or too slowly."""

from __future__ import annotations

import http.server
import io
import json
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from inspector.management.base import UserError
from registry.team.models import Deployment, TelemetrySample
from registry.team.telemetry import COUNTERS, fetch, observed, parse_counters, record
from tests.llama_source import pinned_source
from tests.local_servers import Server, free_port

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def server(smollm2_path, tmp_path):
    s = Server(smollm2_path, free_port(), tmp_path / "llama-server.log")
    s.start()
    yield s
    s.stop()


def add_deployment(model: Path, url: str) -> Deployment:
    out = io.StringIO()
    call_command(
        "deployment",
        "add",
        "--target",
        str(model),
        "--draft",
        str(model),
        "--method",
        "draft-simple",
        "--k",
        "4",
        "--command",
        f"llama-server -m {model} -md {model} --spec-type draft-simple --spec-draft-n-max 4 --metrics",
        "--host",
        "test-box",
        "--url",
        url,
        stdout=out,
    )
    assert out.getvalue().startswith("deployment ")
    return Deployment.objects.get()


def scrape_cmd(d: Deployment) -> str:
    out = io.StringIO()
    call_command("deployment", "scrape", str(d.pk), stdout=out)
    return out.getvalue()


def test_the_counters_read_are_those_the_pinned_llama_server_exports():
    src = (pinned_source() / "tools" / "server" / "server-task.cpp").read_text()
    assert 'prometheus << "# HELP llamacpp:"' in src  # every counter is prefixed "llamacpp:"
    for full in COUNTERS.values():
        assert f'"{full.removeprefix("llamacpp:")}"' in src, full


@pytest.mark.llama
def test_a_scrape_of_a_real_server_records_acceptance_and_a_restart_is_a_reset_not_negative_traffic(
    server, smollm2_path
):
    d = add_deployment(smollm2_path, server.url)
    assert d.author_name and d.k == 4 and d.draft == d.target

    first = scrape_cmd(d)
    assert "first sample stored" in first
    for _ in range(2):
        timings = server.complete()["timings"]
        assert timings["predicted_n"] > 0
    second = scrape_cmd(d)
    assert "acceptance" in second and "+0 drafted" not in second
    s = d.samples.order_by("-pk").first()
    assert s.ok and not s.reset and s.draft_tokens > 0 and s.accepted_tokens > 0 and s.tokens_predicted >= 80
    obs = observed(d)
    assert obs.samples == 2 and 0 < obs.acceptance <= 1 and obs.tokens_per_second > 0
    assert obs.draft_tokens == s.draft_tokens and obs.since == d.samples.order_by("pk").first().scraped_at

    # The JSON, for anyone: observed figures, but no URL or host for an anonymous visitor.
    anon = Client().get(f"/api/deployments/{d.pk}")
    assert anon.status_code == 200
    j = anon.json()
    assert j["observed"]["acceptance"] == pytest.approx(obs.acceptance) and j["observed"]["samples"] == 2
    assert set(j["observed"]) >= {
        "acceptance",
        "draft_tokens",
        "accepted_tokens",
        "tokens_per_second",
        "samples",
        "since",
    }
    assert j["url"] is None and j["host"] is None and server.url not in anon.content.decode()
    assert str(smollm2_path.parent) not in anon.content.decode()  # server paths cut for anonymous visitors
    staff = User.objects.create_user("sam", password="x-sam-123456", is_staff=True)
    c = Client()
    c.force_login(staff)
    assert c.get(f"/api/deployments/{d.pk}").json()["url"] == server.url

    # Restart: the counters fall back to what the new process counted, which is recorded as a reset.
    before = observed(d)
    server.stop()
    server.start()
    server.complete(n=16)
    out = scrape_cmd(d)
    assert "server restart" in out
    s = d.samples.order_by("-pk").first()
    assert s.reset and s.tokens_predicted == s.tokens_predicted_total and s.tokens_predicted >= 16
    after = observed(d)
    assert after.resets == 1 and after.tokens_predicted == before.tokens_predicted + s.tokens_predicted
    assert after.draft_tokens >= before.draft_tokens  # never negative traffic

    # The pages show it beside the measured figures (none here), with the plot.
    page = Client().get(d.get_absolute_url()).content.decode()
    assert 'id="observed-acceptance"' in page and "svg" in page and "server restarted" in page


@pytest.mark.llama
def test_an_unreachable_server_is_a_gap_with_its_error_and_the_beat_goes_on(server, smollm2_path):
    d = add_deployment(smollm2_path, server.url)
    server.complete(n=40)
    scrape_cmd(d)
    server.stop()
    with pytest.raises(UserError, match="scrape failed, recorded as a gap: .*connection refused"):
        scrape_cmd(d)
    gap = d.samples.order_by("-pk").first()
    assert not gap.ok and "connection refused" in gap.error and gap.draft_tokens is None
    # The beat's task scrapes every active deployment with a URL and records the gap; it does not raise.
    from registry.team.tasks import scrape_deployments

    assert scrape_deployments.apply().get() == 1
    assert d.samples.filter(ok=False).count() == 2
    # Coming back: traffic is counted against the last good scrape, across the gap.
    server.start()
    server.complete(n=16)
    scrape_cmd(d)
    s = d.samples.order_by("-pk").first()
    assert s.ok and s.reset and s.tokens_predicted >= 16  # a new process: counters below the last good sample's
    assert observed(d).gaps == 2
    page = Client().get(d.get_absolute_url()).content.decode()
    assert "gap: telemetry unavailable" in page and gap.error == "connection refused"
    assert "connection refused" not in page  # the reason is staff's; everyone else reads one message
    assert server.url not in page and "127.0.0.1" not in page
    # A retired deployment is not scraped any more, and stays on record.
    call_command("deployment", "retire", str(d.pk), stdout=io.StringIO())
    assert scrape_deployments.apply().get() == 0
    d.refresh_from_db()
    assert d.retired_at is not None and Deployment.objects.count() == 1


SECRET_BODY = b"admin_password hunter2\n"  # what an internal service might answer on the port a deployment names


class _Seen:
    """What the fake /metrics servers were asked: requests, and answers being dripped (the most at one time)."""

    lock = threading.Lock()
    requests = dripping = most_dripping = 0

    @classmethod
    def reset(cls) -> None:
        with cls.lock:
            cls.requests = cls.dripping = cls.most_dripping = 0


class _Handler(http.server.BaseHTTPRequestHandler):
    mode = "huge"

    def do_GET(self):  # noqa: N802 - http.server's name
        with _Seen.lock:
            _Seen.requests += 1
        if self.mode == "drip":
            with _Seen.lock:
                _Seen.dripping += 1
                _Seen.most_dripping = max(_Seen.most_dripping, _Seen.dripping)
            try:
                self._drip()
            finally:
                with _Seen.lock:
                    _Seen.dripping -= 1
            return
        if self.mode == "silent":
            time.sleep(30)  # accepts, never answers
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        try:
            if self.mode == "huge":
                line = b"llamacpp:tokens_predicted_total 1\n" * 1000
                for _ in range(200):  # ~7 MB, far over the cap
                    self.wfile.write(line)
            elif self.mode == "slow":
                for _ in range(40):  # 20 s in all, far past the scrape's 2 s
                    self.wfile.write(b"# x\n")
                    self.wfile.flush()
                    time.sleep(0.5)
            elif self.mode == "other":
                self.wfile.write(b"# TYPE go_gc_total counter\ngo_gc_total 3\n")
            elif self.mode == "secret":
                self.wfile.write(SECRET_BODY)
            else:
                self.wfile.write(b"<html>not metrics</html>\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _drip(self) -> None:
        # Status line and headers one byte at a time, each well within urllib3's per-read timeout:
        # without a watchdog the scrape lasts as long as the drip (here 40 s; a real one need never end).
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + b"X-Pad: " + b"x" * 200 + b"\r\n"
        try:
            for byte in head:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(40 / len(head))
            self.wfile.write(b"\r\nllamacpp:tokens_predicted_total 1\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def log_message(self, *args):
        pass


@contextmanager
def fake_metrics(mode: str):
    handler = type("H", (_Handler,), {"mode": mode})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize(
    "mode, error",
    [
        ("huge", "larger than 65,536 bytes"),
        ("slow", "within 2 s"),
        ("html", "not Prometheus text"),
        ("other", "no llamacpp:tokens_predicted_total"),
    ],
)
def test_a_server_answering_too_much_too_slowly_or_not_metrics_is_a_gap(mode, error, settings, smollm2_path):
    settings.SPECREG_TELEMETRY_MAX_BYTES = 65_536
    settings.SPECREG_TELEMETRY_TIMEOUT_SECONDS = 2
    with fake_metrics(mode) as url:
        d = add_deployment(smollm2_path, url)
        started = time.monotonic()
        with pytest.raises(UserError, match="recorded as a gap"):
            scrape_cmd(d)
        assert time.monotonic() - started < 2 + 10  # does not hang: the slow answer lasts 20 s, the huge one ~7 MB
    s = d.samples.get()
    assert not s.ok and error in s.error and url not in s.error and "127.0.0.1" not in s.error


def test_a_counter_reset_counts_from_zero_and_a_gap_changes_no_total(smollm2_path):
    d = add_deployment(smollm2_path, "http://127.0.0.1:9")
    c = dict(draft_tokens=100, accepted_tokens=80, drafts=30, tokens_predicted=200, tokens_predicted_seconds=4)
    record(d, counters={k: float(v) for k, v in c.items()})
    record(d, counters=None, error="connection refused")
    record(d, counters={k: float(v) * 2 for k, v in c.items()})
    record(d, counters={k: float(v) / 4 for k, v in c.items()})  # restarted
    o = observed(d)
    assert (o.draft_tokens, o.accepted_tokens, o.tokens_predicted) == (100 + 25, 80 + 20, 200 + 50)
    assert o.acceptance == pytest.approx(100 / 125) and o.tokens_per_second == pytest.approx(250 / 5)
    assert (o.samples, o.gaps, o.resets) == (3, 1, 1)


def test_metrics_text_is_parsed_with_prometheus_rules():
    text = (
        "# HELP llamacpp:tokens_predicted_total Number of generation tokens processed\n"
        "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total 42\n"
        "# TYPE llamacpp:spec_decode_num_draft_tokens_total counter\nllamacpp:spec_decode_num_draft_tokens_total 7\n"
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 3\n'
    )
    assert parse_counters(text) == {"tokens_predicted": 42.0, "draft_tokens": 7.0}


def test_only_staff_may_give_a_deployment_url_on_the_site(smollm2_path):
    call_command("register_gguf", str(smollm2_path), stdout=io.StringIO())
    from registry.models import GGUFFile

    f = GGUFFile.objects.get()
    user = User.objects.create_user("ann", password="x-ann-123456")
    c = Client()
    c.force_login(user)
    form = {
        "target": f.pk,
        "method": "ngram-simple",
        "command": "llama-server -m x --spec-type ngram-simple",
        "host": "box",
        "url": "http://10.0.0.1:8080",
    }
    r = c.post("/deployments/new", form)
    # The field is not even offered to a non-staff user: the URL is dropped, never stored.
    assert r.status_code == 302
    assert Deployment.objects.get().url == ""
    staff = User.objects.create_user("sam", password="x-sam-123456", is_staff=True)
    c.force_login(staff)
    assert c.post("/deployments/new", {**form, "url": "file:///etc/passwd"}).status_code == 400
    assert c.post("/deployments/new", {**form, "url": "http://10.0.0.1:8080"}).status_code == 302
    assert Deployment.objects.filter(url="http://10.0.0.1:8080").count() == 1
    assert Client().get(f"/api/deployments/{Deployment.objects.get(url__startswith='http').pk}").json()["url"] is None


def test_the_beat_schedules_the_scrape_at_the_interval_setting():
    entry = settings.CELERY_BEAT_SCHEDULE["scrape-deployments"]
    assert entry["task"] == "runner.tasks.scrape_deployments"
    assert entry["schedule"] == float(settings.SPECREG_TELEMETRY_INTERVAL_SECONDS)


def test_fetch_refuses_redirects(settings):
    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data")
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        from registry.team.telemetry import ScrapeError

        with pytest.raises(ScrapeError, match="HTTP 302"):
            fetch(f"http://127.0.0.1:{httpd.server_address[1]}/metrics")
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_gap_keeps_the_servers_address_out_of_everything_anonymous_visitors_see(smollm2_path):
    d = add_deployment(smollm2_path, f"http://127.0.0.1:{free_port()}")  # nothing listens there
    with pytest.raises(UserError, match="recorded as a gap: connection refused"):
        scrape_cmd(d)
    assert d.samples.get().error == "connection refused"
    page = Client().get(d.get_absolute_url()).content.decode()
    assert "gap: telemetry unavailable" in page and "UTC: telemetry unavailable" in page  # table and plot
    assert d.url not in page and "127.0.0.1" not in page
    assert "127.0.0.1" not in Client().get(f"/api/deployments/{d.pk}").content.decode()
    staff = User.objects.create_user("sam", password="x-sam-123456", is_staff=True)
    c = Client()
    c.force_login(staff)
    page = c.get(d.get_absolute_url()).content.decode()
    assert "gap: connection refused" in page and "scrape failed: connection refused" in page  # staff read why
    # Messages urllib3 writes with the host (or the certificate's names) in them are ours instead.
    import urllib3

    from registry.team.telemetry import _reason

    exc = urllib3.exceptions.SSLError("hostname 'GPU-7.internal' doesn't match 'other'")
    assert _reason(exc) == "TLS error: the certificate is for another host"


def test_errors_stored_with_the_url_before_lose_it_in_the_migration(smollm2_path):
    import importlib

    from django.apps import apps

    d = add_deployment(smollm2_path, "http://10.1.2.3:8080")
    now = timezone.now()
    for error in (
        "http://10.1.2.3:8080/metrics: connection refused",  # rows as the old code stored them
        "http://10.1.2.3:8080/metrics: Failed to resolve 'gpu-7' ([Errno -2])",
        "not Prometheus text: could not convert string to float: 'hunter2'",
    ):
        TelemetrySample.objects.create(deployment=d, scraped_at=now, ok=False, error=error)
    importlib.import_module("registry.team.migrations.0002_scrape_errors_without_url").scrub(apps, None)
    assert list(d.samples.order_by("pk").values_list("error", flat=True)) == [
        "connection refused",
        "host name not found",
        "not Prometheus text: could not convert string to float: 'hunter2'",
    ]
    # 0003 keeps only the known reason: the parser's message quoted the body of whatever answered.
    importlib.import_module("registry.team.migrations.0003_scrape_queue_and_errors_trimmed").trim(apps, None)
    assert list(d.samples.order_by("pk").values_list("error", flat=True)) == [
        "connection refused",
        "host name not found",
        "not Prometheus text",
    ]


def _observed_in_python(d: Deployment) -> dict:
    """observed() as it was, summing every sample in Python: the aggregate must give the same answer."""
    samples = list(d.samples.order_by("scraped_at", "pk"))
    good = [s for s in samples if s.ok]
    drafted = sum(s.draft_tokens or 0 for s in good)
    accepted = sum(s.accepted_tokens or 0 for s in good)
    predicted = sum(s.tokens_predicted or 0 for s in good)
    seconds = sum(s.tokens_predicted_seconds or 0 for s in good)
    return {
        "acceptance": accepted / drafted if drafted > 0 else None,
        "draft_tokens": int(drafted),
        "accepted_tokens": int(accepted),
        "tokens_per_second": predicted / seconds if seconds > 0 else None,
        "tokens_predicted": int(predicted),
        "samples": len(good),
        "gaps": len(samples) - len(good),
        "resets": sum(1 for s in good if s.reset),
        "since": good[0].scraped_at.isoformat() if good else None,
        "latest": good[-1].scraped_at.isoformat() if good else None,
    }


def test_observed_sums_in_one_query_and_answers_as_before(smollm2_path, django_assert_num_queries):
    from datetime import timedelta

    from django.utils import timezone

    d = add_deployment(smollm2_path, "http://127.0.0.1:9")
    with django_assert_num_queries(1):
        empty = observed(d)
    assert empty.to_dict() == _observed_in_python(d) and empty.samples == 0 and empty.since is None
    t0 = timezone.now() - timedelta(hours=1)
    record(d, counters=None, error="connection refused", at=t0)  # a gap before the first good scrape
    base = dict(draft_tokens=10, accepted_tokens=7, drafts=3, tokens_predicted=40, tokens_predicted_seconds=0.8)
    for i in range(1, 30):
        factor = i if i < 20 else i - 19  # restarts at i=20
        counters = {k: v * factor for k, v in base.items() if not (i == 5 and k == "draft_tokens")}
        record(d, counters=counters if i % 7 else None, error="timed out", at=t0 + timedelta(minutes=i))
    with django_assert_num_queries(1) as queries:
        o = observed(d)
    assert "SUM(" in queries.captured_queries[0]["sql"].upper()  # summed by the database, not row by row
    assert o.to_dict() == pytest.approx(_observed_in_python(d))
    assert o.gaps == 5 and o.resets == 1 and o.since == t0 + timedelta(minutes=1)


# --- A slow /metrics must not stall anything; failures must not leak what answered ------------------------------


def test_a_server_dripping_its_headers_is_cut_at_the_deadline_and_recorded_as_a_gap(settings, smollm2_path):
    """urllib3's read timeout is per read: headers sent a byte every 0.16 s held a scrape for the whole
    drip (40 s here). The watchdog shuts the socket at the deadline."""
    settings.SPECREG_TELEMETRY_TIMEOUT_SECONDS = 2
    with fake_metrics("drip") as url:
        d = add_deployment(smollm2_path, url)
        started = time.monotonic()
        with pytest.raises(UserError, match="recorded as a gap: no complete answer within 2 s"):
            scrape_cmd(d)
        took = time.monotonic() - started
        assert took < 2 + 10, f"the scrape took {took:.1f} s"  # does not hang: the drip lasts 40 s
        s = d.samples.get()
        assert not s.ok and s.error == "no complete answer within 2 s"

        # The beat's round: three dripping servers are read in parallel, so the round too ends at one deadline.
        for _ in range(2):
            Deployment.objects.create(
                target=d.target,
                draft=d.draft,
                method="draft-simple",
                k=4,
                command="x",
                url=url,
                author_name="t",
                deployed_at=timezone.now(),
            )
        from registry.team.telemetry import scrape_active

        _Seen.reset()
        started = time.monotonic()
        samples = scrape_active()
        took = time.monotonic() - started
    assert len(samples) == 3 and not any(s.ok for s in samples) and took < 2 + 10, f"the round took {took:.1f} s"
    assert _Seen.most_dripping >= 3  # the three were read at the same time, so one deadline ended them all


def test_scrape_now_is_queued_for_the_telemetry_worker_and_the_page_shows_it(settings, smollm2_path, monkeypatch):
    """Staff's "scrape now" fetched inside the web request (a dripping server held it for as long as it
    liked); now it is queued on the telemetry queue and the page says it is waiting, then running."""
    settings.SPECREG_TELEMETRY_TIMEOUT_SECONDS = 2
    from registry.queues import telemetry_queue
    from registry.team.tasks import scrape_deployment

    sent: list[tuple] = []
    monkeypatch.setattr(scrape_deployment, "apply_async", lambda args, queue: sent.append((args, queue)))
    staff = User.objects.create_user("sam", password="x-sam-123456", is_staff=True)
    c = Client()
    c.force_login(staff)
    with fake_metrics("drip") as url:
        d = add_deployment(smollm2_path, url)
        _Seen.reset()
        r = c.post(f"/deployments/{d.pk}/scrape")
        assert r.status_code == 302 and _Seen.requests == 0  # nothing fetched in the request
        assert sent == [([d.pk], telemetry_queue())] and telemetry_queue() != settings.CELERY_TASK_DEFAULT_QUEUE
        page = c.get(d.get_absolute_url()).content.decode()
        assert 'id="scrape-state"' in page and "waiting for the telemetry worker" in page
        assert 'id="scrape-no-worker"' in page  # no worker listens on the queue in this test
        c.post(f"/deployments/{d.pk}/scrape")  # a second click while one waits queues nothing more
        assert len(sent) == 1
        # What the telemetry worker runs: the gap is stored, and the page no longer says it is waiting.
        started = time.monotonic()
        assert scrape_deployment.run(d.pk) == "gap"
        assert _Seen.requests == 1 and time.monotonic() - started < 2 + 10  # does not hang: the drip lasts 40 s
    d.refresh_from_db()
    assert d.scrape_queued_at is None and d.samples.get().error == "no complete answer within 2 s"
    page = c.get(d.get_absolute_url()).content.decode()
    assert 'id="scrape-state"' not in page and "gap: no complete answer within 2 s" in page
    # Only staff may ask.
    user = User.objects.create_user("ann", password="x-ann-123456")
    c.force_login(user)
    assert c.post(f"/deployments/{d.pk}/scrape").status_code == 403 and len(sent) == 1


def test_scrapes_have_a_queue_and_a_worker_of_their_own(settings, monkeypatch):
    """A queued check (a Hub job on the general queue) never waits behind a scrape: scrapes are routed to the
    telemetry queue, and serve starts a worker for it beside the general and the benchmark ones."""
    from registry.queues import telemetry_queue
    from runner.celery import app
    from runner.management.commands import serve

    for task in ("runner.tasks.scrape_deployments", "runner.tasks.scrape_deployment"):
        assert app.amqp.router.route({}, task)["queue"].name == telemetry_queue()
    assert app.amqp.router.route({}, "runner.tasks.hub_job")["queue"].name == settings.CELERY_TASK_DEFAULT_QUEUE

    started: list[list[str]] = []

    class Child:
        pid = 0

        def __init__(self, argv, **kwargs):
            started.append(argv)

        def poll(self):
            return 0  # "exited": serve stops at once

    monkeypatch.setattr(serve.subprocess, "Popen", Child)
    monkeypatch.setattr(serve.signal, "signal", lambda *a: None)
    monkeypatch.setattr(serve, "stop_all", lambda procs: None)
    call_command("serve", "--port", "1", stdout=io.StringIO(), stderr=io.StringIO())
    workers = {argv[argv.index("-n") + 1]: argv[argv.index("-Q") + 1] for argv in started if "-Q" in argv}
    assert workers == {
        "general@%h": settings.CELERY_TASK_DEFAULT_QUEUE,
        "telemetry@%h": telemetry_queue(),
        "crawl@%h": f"{settings.SPECREG_QUEUE_PREFIX}crawl",
        "bench@%h": workers["bench@%h"],
    }
    crawl = next(argv for argv in started if "crawl@%h" in argv)
    assert crawl[crawl.index("--pool") + 1] == "threads"  # a crawl's tasks wait on the Hub, four at once
    assert crawl[crawl.index("--concurrency") + 1] == str(settings.SPECREG_CRAWL_CONCURRENCY)
    for task in ("registry.tasks.crawl_list", "registry.tasks.crawl_repo"):
        assert app.amqp.router.route({}, task)["queue"].name == f"{settings.SPECREG_QUEUE_PREFIX}crawl"


def test_anonymous_visitors_read_one_message_for_every_failure_and_nobody_reads_what_answered(settings, smollm2_path):
    """A refused port, a time-out and an internal service answering with a secret look the same to everyone
    but staff (pages, the JSON API, export_kb); staff read the reason, never the body, which is not stored."""
    settings.SPECREG_TELEMETRY_TIMEOUT_SECONDS = 1
    with fake_metrics("secret") as secret_url, fake_metrics("silent") as silent_url:
        urls = {"secret": secret_url, "refused": f"http://127.0.0.1:{free_port()}", "silent": silent_url}
        ds = {}
        for kind, url in urls.items():
            d = ds[kind] = Deployment.objects.create(
                target=add_target(smollm2_path),
                method="none",
                command="llama-server",
                url=url,
                author_name="t",
                deployed_at=timezone.now(),
            )
            with pytest.raises(UserError):
                scrape_cmd(d)
    errors = {kind: d.samples.get().error for kind, d in ds.items()}
    assert errors["silent"] in ("timed out", "no complete answer within 1 s")  # the socket's timeout or the watchdog
    assert {**errors, "silent": "-"} == {
        "secret": "not Prometheus text",
        "refused": "connection refused",
        "silent": "-",
    }

    reasons = ("not Prometheus", "refused", "timed out", "no complete answer", "scrape failed")
    ann = User.objects.create_user("ann", password="x-ann-123456")  # signed in, not staff
    staff = User.objects.create_user("sam", password="x-sam-123456", is_staff=True)
    clients = {"anonymous": Client(), "user": Client(), "staff": Client()}
    clients["user"].force_login(ann)
    clients["staff"].force_login(staff)
    for who, c in clients.items():
        for kind, d in ds.items():
            page = c.get(d.get_absolute_url()).content.decode()
            one = c.get(f"/api/deployments/{d.pk}").json()
            listed = next(r for r in c.get("/api/deployments").json()["results"] if r["id"] == d.pk)
            assert "hunter2" not in page and "hunter2" not in json.dumps(one)
            assert one["telemetry"]["available"] is False and one["telemetry"]["at"] and listed == one
            if who == "staff":
                assert f"gap: {errors[kind]}" in page and one["telemetry"]["message"] == errors[kind]
            else:
                assert one["telemetry"]["message"] == "telemetry unavailable" and "gap: telemetry unavailable" in page
                assert not any(r in page for r in reasons), (who, kind)
    # The export goes to people outside staff: one message for every gap there too.
    from registry.kb.export import knowledge_base

    exported = [s for dep in knowledge_base()["sections"]["deployments"] for s in dep["samples"]]
    assert [s["error"] for s in exported] == ["telemetry unavailable"] * 3
    # Errors are trimmed when recorded, whoever passes them (a file imported from elsewhere included).
    record(ds["secret"], counters=None, error="not Prometheus text: could not convert string to float: 'hunter2'")
    record(ds["secret"], counters=None, error="SECRET hunter2")
    assert list(ds["secret"].samples.order_by("pk").values_list("error", flat=True))[1:] == [
        "not Prometheus text",
        "scrape failed",
    ]


def add_target(model: Path):
    from registry.models import GGUFFile

    f = GGUFFile.objects.filter(source=str(model)).first()
    if f is None:
        call_command("register_gguf", str(model), stdout=io.StringIO())
        f = GGUFFile.objects.get(source=str(model))
    return f
