"""The web pages, JSON API and CSV export through Django's test client."""

from __future__ import annotations

import csv
import io
import socket

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from inspector.info import inspect_source
from registry.catalog.registration import register
from registry.hub.jobs import execute_job
from registry.models import GGUFFile, HubJob, Pair, ReportedResult
from registry.results.figures import refresh_best
from registry.web.header_upload import NeedMore, inspect_prefix
from tests.ggufgen import vocab, write_gguf
from tests.registering import register_as

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


Q05 = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
Q15 = "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"
EVIL = '<script>alert("x")</script>'


@pytest.fixture
def qwen_pair(infos):
    register_as(infos["qwen05"], Q05, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", size=1)
    register_as(infos["qwen15"], Q15, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", size=1)
    register_as(infos["smollm2"], "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", size=1)
    return Pair.objects.get()


@pytest.fixture
def evil_pair(tmp_path):
    toks = vocab(300)
    toks[7] = EVIL
    paths = [
        write_gguf(tmp_path / f"{n}.gguf", tokens=toks, eos=7, chat_template=EVIL + "{{ messages }}")
        for n in ("a", "b")
    ]
    for i, p in enumerate(paths):
        register(
            inspect_source(str(p)), source=f"hf://evil/{EVIL}-{i}/m{i}.gguf", repo=f"evil/{i}", path=f"{EVIL}{i}.gguf"
        )
    return Pair.objects.get()


@pytest.fixture
def user_client():
    user = User.objects.create_user("alice", password="correct horse battery")
    c = Client()
    c.force_login(user)
    return c


def test_the_first_start_page_offers_the_reported_examples_and_the_curated_list(client):
    html = client.get("/").content.decode()
    assert "Getting started" in html and "Qwen2.5-Coder-32B-Instruct" in html and "72.1%" in html and "1.71×" in html
    assert 'href="https://github.com/ggml-org/llama.cpp/issues/5877"' in html  # each figure links its public source
    assert "reported" in html and "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF" in html
    assert "Log in</a> to import" in html  # anonymous users are not offered the write


def test_the_table_shows_compatible_pairs_with_their_best_reported_result(client, qwen_pair):
    ReportedResult.objects.create(
        pair=qwen_pair, k=24, acceptance=0.708, speedup=11.0, content_type="code", citation="client notes"
    )
    refresh_best(qwen_pair)
    html = client.get("/").content.decode()
    assert "Getting started" not in html and "1 pair" in html
    assert "Qwen2.5-Coder-1.5B-Instruct" in html and "Qwen2.5-Coder-0.5B-Instruct" in html  # the base models
    assert "11.00×" in html and "70.8%" in html and "badge reported" in html and "2.8×" in html


def test_search_and_filters_narrow_the_table(client, qwen_pair, infos):
    ReportedResult.objects.create(
        pair=qwen_pair, k=4, speedup=0.5, content_type="code", hardware="2-core CPU", citation="x"
    )
    refresh_best(qwen_pair)
    count = lambda **q: client.get("/api/pairs", q).json()["count"]  # noqa: E731
    assert count() == 1
    assert count(q="qwen2") == 1 and count(q="coder-0.5b") == 1 and count(q="smollm") == 0
    assert count(q="BPE · ~152k") == 1  # the family name
    assert count(content_type="code") == 1 and count(content_type="prose") == 0
    assert count(hardware="2-core") == 1 and count(hardware="H100") == 0
    assert count(min_speedup="1") == 0 and count(min_speedup="0.4") == 1
    assert count(verdict="incompatible") == 0 and count(verdict="all") == 1
    assert count(min_speedup="junk", sort="nonsense", page="-3") == 1  # bad parameters fall back


def test_the_table_sorts_and_pages(client, tmp_path):
    # 12 files of one small vocabulary, each twice the size of the last: 66 compatible pairs, all worth listing.
    for i in range(12):
        p = write_gguf(tmp_path / f"m{i}.gguf", tokens=vocab(100), kv=None)
        info = inspect_source(str(p))
        info.parameter_count = 1000 * 2**i
        register(info, source=f"/models/m{i}.gguf", path=f"/models/m{i}.gguf")
    first = client.get("/api/pairs", {"sort": "-ratio"}).json()
    assert first["count"] == 66 and first["num_pages"] == 2 and len(first["results"]) == 50
    ratios = [r["size_ratio"] for r in first["results"]]
    assert ratios == sorted(ratios, reverse=True) and ratios[0] == 2048.0
    second = client.get("/api/pairs", {"sort": "-ratio", "page": "2"}).json()
    assert len(second["results"]) == 16
    html = client.get("/", {"sort": "-ratio"}).content.decode()
    assert "Page 1 of 2" in html and "page=2" in html


def test_the_csv_export_has_every_filtered_row(client, qwen_pair):
    response = client.get("/pairs.csv", {"q": "qwen"})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][:3] == ["target", "draft", "compatible"] and len(rows) == 2
    assert rows[1][0].endswith("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf") and rows[1][2] == "True"


def test_the_model_page_shows_the_inspection_and_compatible_drafts(client, qwen_pair):
    html = client.get(qwen_pair.target.get_absolute_url()).content.decode()
    for text in (
        "qwen2",
        "151936 tokens",
        "Stored in the file",
        "Effective in llama.cpp",
        "&lt;|endoftext|&gt;",
        "Compatible drafts",
        "Qwen2.5-Coder-0.5B-Instruct",  # the draft, by its base model
        "All metadata",
        "Q4_K",
        "general.architecture",
    ):
        assert text in html, text
    data = client.get(f"/api/models/{qwen_pair.target.model_id}").json()
    assert (
        data["drafts"][0]["draft"]["id"] == qwen_pair.draft_id
        and data["file"]["info"]["tokenizer"]["n_tokens"] == 151936
    )


def test_model_supplied_strings_are_escaped_everywhere(client, evil_pair):
    for url in (evil_pair.target.get_absolute_url(), evil_pair.get_absolute_url(), "/?verdict=all", f"/?q={EVIL}"):
        html = client.get(url).content.decode()
        assert EVIL not in html, url
    html = client.get(evil_pair.target.get_absolute_url()).content.decode()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html  # token text and chat template, escaped


def test_the_pair_page_explains_each_rule_and_recommends_a_command(client, qwen_pair):
    html = client.get(qwen_pair.get_absolute_url()).content.decode()
    for text in (
        "1. Vocabulary type",
        "2. BOS token",
        "4. Vocabulary size",
        "5. Token texts from id 5",
        "Compatible: the draft can draft for this target",
        "Not benchmarked yet",
        "llama-server -m models/qwen2.5-coder-1.5b",
        "-md models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "--spec-draft-n-max 8",
        'id="runs"',
    ):
        assert text in html, text


def test_the_pair_page_plots_reported_results_and_uses_only_a_winning_k(client, qwen_pair):
    for k, s, a in ((4, 0.5, 0.77), (8, 0.35, 0.56)):
        ReportedResult.objects.create(
            pair=qwen_pair, k=k, acceptance=a, speedup=s, content_type="<b>code</b>", citation="notes"
        )
    html = client.get(qwen_pair.get_absolute_url()).content.decode()
    assert "<svg" in html and "Reported speedup and acceptance" in html and "&lt;b&gt;code&lt;/b&gt;" in html
    assert "<b>code</b>" not in html
    assert "run without a draft" in html and "-md " not in html.split('id="server-command"')[1].split("</pre>")[0]
    ReportedResult.objects.create(
        pair=qwen_pair, k=24, acceptance=0.708, speedup=11.0, content_type="code", citation="client"
    )
    data = client.get(f"/api/pairs/{qwen_pair.pk}").json()
    assert data["recommendation"]["use_draft"] and data["recommendation"]["k"] == 24
    assert "Reported, not measured here" in data["recommendation"]["basis"]
    assert {r["kind"] for r in data["reported"]} == {"reported"} and data["measured"] == []


def test_check_a_pair_answers_for_registered_files(client, qwen_pair):
    response = client.get("/check/", {"target": qwen_pair.target.source, "draft": qwen_pair.draft.source})
    html = response.content.decode()
    assert response.status_code == 200 and "Compatible: the draft can draft" in html and "5. Token texts" in html
    smol = GGUFFile.objects.get(repo__startswith="HuggingFaceTB").source
    bad = client.get("/api/check", {"target": qwen_pair.target.source, "draft": smol}).json()
    assert bad["compatible"] is False and bad["failed_rule"] == "vocab_size"


def test_check_a_pair_reads_hf_files_remotely(client, fake_hub, qwen05_header_path, qwen15_header_path):
    fake_hub.add_repo(Q05, {"q05.gguf": qwen05_header_path})
    fake_hub.add_repo(Q15, {"q15.gguf": qwen15_header_path})
    queued = client.get("/api/check", {"target": f"hf://{Q15}/q15.gguf", "draft": f"hf://{Q05}/q05.gguf"})
    assert queued.status_code == 202  # an anonymous visitor's Hub reads run in a worker
    assert execute_job(queued.json()["job"]) == "done"
    data = client.get(queued.json()["url"]).json()["result"]
    assert data["compatible"] is True
    assert not GGUFFile.objects.exists()  # checking registers nothing


def test_an_anonymous_check_that_reads_the_hub_is_queued_not_read_in_the_request(
    client, user_client, fake_hub, qwen05_header_path, qwen15_header_path, smollm2_path
):
    fake_hub.add_repo(Q05, {"q05.gguf": qwen05_header_path})
    fake_hub.add_repo(Q15, {"q15.gguf": qwen15_header_path, "smol.gguf": smollm2_path})
    pair = {"target": f"hf://{Q15}/q15.gguf", "draft": f"hf://{Q05}/q05.gguf"}
    r = client.get("/api/check", pair)
    assert r.status_code == 202 and r.json()["status"] == "queued"
    page = client.get("/check/", pair)
    assert page.status_code == 302 and page["Location"] == f"/jobs/{r.json()['job'] + 1}/"
    # Nothing was asked of the Hub inside either request: no resolve, no CDN, no API call.
    assert fake_hub.file_requests(Q15, "q15.gguf") == {} and fake_hub.file_requests(Q05, "q05.gguf") == {}
    assert fake_hub.requests == []
    job = HubJob.objects.get(pk=r.json()["job"])
    assert (job.kind, job.status, job.requested_by, job.params["server_token"]) == ("check_pair", "queued", None, False)
    assert execute_job(job.pk) == "done"
    assert fake_hub.file_requests(Q15, "q15.gguf")  # the worker read it
    job.refresh_from_db()
    assert job.result["compatible"] is True and job.messages[-1]["text"].startswith("Compatible:")
    html = client.get(job.get_absolute_url()).content.decode()
    assert 'id="check-result"' in html and "Compatible: the draft can draft" in html and "5. Token texts" in html
    # An incompatible pair: the job says which rule failed and why, and its page lists every rule.
    bad = client.get("/api/check", {"target": f"hf://{Q15}/q15.gguf", "draft": f"hf://{Q15}/smol.gguf"}).json()
    assert execute_job(bad["job"]) == "done"
    job = HubJob.objects.get(pk=bad["job"])
    assert job.result["compatible"] is False
    assert job.messages[-1]["text"].startswith(f"Not usable as a draft: the {job.result['failed_rule']} rule fails — ")
    html = client.get(bad["page"]).content.decode()
    assert "✗" in html and "✓" in html and job.result["failed_rule"] in html
    # A signed-in user's check is answered inline, as before; so is an anonymous check of registered files.
    jobs = HubJob.objects.count()
    fake_hub.reset_counts()
    inline = user_client.get("/api/check", pair)
    assert inline.status_code == 200 and inline.json()["compatible"] is True and fake_hub.file_requests(Q15, "q15.gguf")
    page = user_client.get("/check/", pair)
    assert page.status_code == 200 and "Compatible: the draft can draft" in page.content.decode()
    assert HubJob.objects.count() == jobs
    # Names that can never be read are refused at once, before anything is queued.
    r = client.get("/api/check", {"target": "hf://../x/m.gguf", "draft": pair["draft"]})
    assert r.status_code == 400 and HubJob.objects.count() == jobs
    r = client.get("/api/check", {"target": "/etc/passwd", "draft": pair["draft"]})
    assert r.status_code == 400 and "server paths are not taken" in r.json()["error"] and HubJob.objects.count() == jobs


def test_check_a_pair_never_reads_server_paths(client, smollm2_path):
    response = client.get("/check/", {"target": str(smollm2_path), "draft": "/etc/passwd"})
    assert response.status_code == 400 and "server paths are not taken" in response.content.decode()
    client.force_login(User.objects.create_user("ann", password="x" * 12))  # signed in: paths, but registered only
    response = client.get("/check/", {"target": str(smollm2_path), "draft": "/etc/passwd"})
    assert response.status_code == 400 and "not a registered file" in response.content.decode()


def test_the_local_header_endpoint_asks_for_more_bytes_until_it_has_the_header(client, smollm2_path):
    data = smollm2_path.read_bytes()[:3_000_000]
    total = smollm2_path.stat().st_size
    url = reverse("local_inspect")
    short = client.post(
        url,
        data[:100_000],
        content_type="application/octet-stream",
        headers={"X-File-Name": "smol.gguf", "X-File-Size": str(total)},
    ).json()
    assert short["status"] == "need_more"
    header_size = inspect_source(str(smollm2_path)).header_size
    assert 100_000 < short["need"] <= header_size  # a lower bound: never asks for more than the header
    ok = client.post(
        url,
        data[:header_size],
        content_type="application/octet-stream",
        headers={"X-File-Name": "smol.gguf", "X-File-Size": str(total)},
    ).json()
    assert ok["status"] == "ok" and ok["header_size"] == header_size and ok["info"]["tokenizer"]["n_tokens"] == 49152
    assert "Registered files it can pair with" in ok["html"]


def test_the_local_header_endpoint_refuses_non_gguf_bytes_and_needs_csrf(client):
    answer = client.post(
        reverse("local_inspect"), b"<html>", content_type="application/octet-stream", headers={"X-File-Size": "6"}
    )
    assert answer.status_code == 422 and "not a GGUF file" in answer.json()["error"]
    strict = Client(enforce_csrf_checks=True)
    assert (
        strict.post(
            reverse("local_inspect"), b"GGUF", content_type="application/octet-stream", headers={"X-File-Size": "4"}
        ).status_code
        == 403
    )


def test_the_zero_padded_parse_gives_a_lower_bound_for_every_prefix(smollm2_path):
    data = smollm2_path.read_bytes()[:2_000_000]
    header_size = inspect_source(str(smollm2_path)).header_size
    for n in (24, 1000, 50_000, 500_000, 1_500_000, header_size - 1):
        with pytest.raises(NeedMore) as more:
            inspect_prefix("s.gguf", data[:n], 98_362_432)
        assert n < more.value.need <= header_size


def test_import_needs_login_and_csrf(client, user_client):
    assert client.get("/import/").status_code == 302
    assert client.post("/import/curated").status_code == 302
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(User.objects.get(username="alice"))
    assert strict.post("/import/", {"repo": Q05}).status_code == 403


def _run_job(response) -> str:
    """Follow a queued Hub job to its page after running it as the worker would (same function)."""
    assert response.status_code == 302 and response["Location"].startswith("/jobs/"), response
    job_id = int(response["Location"].split("/")[2])
    assert HubJob.objects.get(pk=job_id).status == "queued"  # nothing ran inside the request
    execute_job(job_id)
    return Client().get(response["Location"]).content.decode()


def test_the_import_form_queues_an_import_and_reports_bad_names(user_client, fake_hub, qwen05_header_path):
    fake_hub.add_repo(Q05, {"qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": qwen05_header_path})
    assert "1 added" in _run_job(user_client.post("/import/", {"repo": Q05, "include": "*Q4_K_M*"}))
    assert GGUFFile.objects.get().repo == Q05
    assert "1 unchanged" in _run_job(user_client.post("/import/", {"repo": Q05}))
    bad = user_client.post("/import/", {"repo": "../etc/passwd"})
    assert bad.status_code == 400 and "not a model repository name" in bad.content.decode()
    page = _run_job(user_client.post("/import/", {"repo": "nobody/nothing"}))
    # a signed-in user without the server-token permission: missing and private read alike
    assert "failed" in page and "nobody/nothing: not found, or not public" in page


def test_a_queued_job_says_when_no_worker_listens(user_client, settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = "nobody-listens.specreg"
    r = user_client.post("/import/curated")
    page = user_client.get(r["Location"]).content.decode()
    assert "No worker is listening on queue" in page and "nobody-listens.specreg" in page
    assert user_client.get("/api" + r["Location"].rstrip("/")).json()["no_worker"] is True


def test_the_curated_import_says_clearly_when_the_hub_is_unreachable(user_client, fake_hub, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    html = _run_job(user_client.post("/import/curated"))
    assert "The Hugging Face Hub cannot be reached from this server" in html and "Nothing was imported" in html


def test_the_curated_import_imports_what_the_hub_has(user_client, fake_hub, qwen05_header_path, qwen15_header_path):
    fake_hub.add_repo(
        Q05,
        {
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": qwen05_header_path,
            "qwen2.5-coder-0.5b-instruct-q8_0.gguf": qwen05_header_path,
        },
    )
    # The 1.5B's header stands in for the 32B, the target of the shipped (published) figures.
    fake_hub.add_repo(
        "Qwen/Qwen2.5-Coder-32B-Instruct-GGUF", {"qwen2.5-coder-32b-instruct-q4_k_m.gguf": qwen15_header_path}
    )
    html = _run_job(user_client.post("/import/curated"))
    assert GGUFFile.objects.count() == 2  # one quant each, as the curated globs say
    assert "not found" in html  # the repos this Hub lacks are named
    pair = Pair.objects.get()
    assert pair.reported_results.count() == 2
    assert "1.62×" in Client().get(pair.get_absolute_url()).content.decode()


def test_adding_a_reported_result_needs_staff_or_the_permission_and_valid_figures(client, user_client, qwen_pair):
    url = reverse("add_reported", args=[qwen_pair.pk])
    form = {"k": "24", "acceptance": "0.708", "speedup": "11", "content_type": "code", "citation": "client notes"}
    assert client.post(url, form).status_code == 302 and not ReportedResult.objects.exists()
    assert user_client.post(url, form | {"speedup": "50"}).status_code == 403  # any account: no
    assert "Add a reported result" not in user_client.get(qwen_pair.get_absolute_url()).content.decode()
    alice = User.objects.get(username="alice")
    alice.user_permissions.add(Permission.objects.get(codename="add_reportedresult"))
    alice = User.objects.get(pk=alice.pk)  # permissions are cached on the instance
    user_client.force_login(alice)
    assert user_client.post(url, form | {"acceptance": "70.8"}).status_code == 400
    assert user_client.post(url, form).status_code == 302
    r = ReportedResult.objects.get()
    assert r.reported_by.username == "alice"
    qwen_pair.refresh_from_db()
    assert qwen_pair.best_kind == "reported" and qwen_pair.best_k == 24
    assert "alice" in client.get(qwen_pair.get_absolute_url()).content.decode()  # shown with who reported it


def test_deleting_reported_results_in_bulk_in_the_admin_recomputes_the_best(client, qwen_pair):
    from django.contrib.admin.sites import site

    from registry.admin import ReportedResultAdmin

    for speedup in (50, 1.2):
        ReportedResult.objects.create(pair=qwen_pair, k=4, speedup=speedup, citation="x")
    refresh_best(qwen_pair)
    qwen_pair.refresh_from_db()
    assert qwen_pair.best_speedup == 50
    admin = ReportedResultAdmin(ReportedResult, site)
    admin.delete_queryset(None, ReportedResult.objects.filter(speedup=50))
    qwen_pair.refresh_from_db()
    assert qwen_pair.best_speedup == 1.2


def test_the_api_serves_files_and_examples(client, qwen_pair):
    f = client.get(f"/api/files/{qwen_pair.draft_id}").json()
    assert f["source"] == qwen_pair.draft.source and f["info"]["architecture"] == "qwen2"
    ex = client.get("/api/examples").json()
    assert ex["reported_examples"][0]["k"] == 5 and len(ex["curated"]) >= 6
    # Shipped figures carry a public source, never private notes or a file outside the repository.
    for e in ex["reported_examples"]:
        assert e["source_url"].startswith("https://") and "shared/" not in e["citation"]
        assert "client" not in e["citation"].lower()
    assert client.get("/api/pairs/999999").status_code == 404


def test_measured_results_take_precedence_and_are_never_mixed_with_reported_ones(client, qwen_pair):
    from registry.models import BenchmarkResult, BenchmarkRun

    ReportedResult.objects.create(
        pair=qwen_pair, k=24, acceptance=0.708, speedup=11.0, content_type="code", citation="client"
    )
    run = BenchmarkRun.objects.create(pair=qwen_pair, queue="bench.cpu", status="done")
    common = dict(
        run=run,
        pair=qwen_pair,
        n_predict=128,
        repeats=3,
        n_prompts=3,
        content_type="code",
        hardware="2-core CPU",
        llama_cpp_build="b11434",
    )
    BenchmarkResult.objects.create(k=4, acceptance=0.77, speedup=0.5, status="ok", **common)
    BenchmarkResult.objects.create(k=8, acceptance=None, speedup=9.9, status="failed", **common)  # not a figure
    refresh_best(qwen_pair)
    qwen_pair.refresh_from_db()
    assert (qwen_pair.best_kind, qwen_pair.best_k, qwen_pair.best_speedup) == ("measured", 4, 0.5)
    data = client.get(f"/api/pairs/{qwen_pair.pk}").json()
    assert [f["k"] for f in data["measured"]] == [4] and [f["k"] for f in data["reported"]] == [24]
    assert not data["recommendation"]["use_draft"]  # measured here: slower than the target alone
    html = client.get(qwen_pair.get_absolute_url()).content.decode()
    assert "Measured speedup and acceptance" in html and "Reported speedup and acceptance" in html
    row = client.get("/api/pairs").json()["results"][0]
    assert row["best"]["kind"] == "measured"


def test_the_table_builds_pair_links_like_the_url_configuration():
    from registry.table.cells import PAIR_URL

    assert reverse("pair", args=[7]) == f"{PAIR_URL}7/"


def test_staff_can_browse_the_admin_and_pairs_cannot_be_typed_in(client, qwen_pair):
    client.force_login(User.objects.create_superuser("root", password="x" * 12))
    for name in ("gguffile", "pair", "reportedresult", "model", "family", "tokentable"):
        assert client.get(f"/admin/registry/{name}/").status_code == 200, name
    assert client.get(f"/admin/registry/pair/{qwen_pair.pk}/change/").status_code == 200
    assert client.get("/admin/registry/pair/add/").status_code == 403


def _server_command(html: str) -> str:
    return html.split('id="server-command">')[1].split("</pre>")[0]


def test_the_pair_page_recommends_the_best_results_method_not_a_draft_model(client, qwen_pair):
    from registry.catalog.pairing import pair_for
    from registry.models import BenchmarkResult, BenchmarkRun

    target = qwen_pair.target
    own = pair_for(target, target)  # draftless results live on the target's own pair
    run = BenchmarkRun.objects.create(pair=own, queue="bench.cpu", status="done")  # wrote no command
    common = dict(
        run=run,
        pair=own,
        n_predict=128,
        repeats=3,
        n_prompts=3,
        content_type="code",
        hardware="2-core CPU",
        llama_cpp_build="b11434",
        status="ok",
    )
    BenchmarkResult.objects.create(method="draft-simple", k=8, speedup=1.1, **common)
    BenchmarkResult.objects.create(
        method="ngram-map-k", k=16, speedup=1.6, acceptance=0.4, options=[["--spec-ngram-map-k-size-n", "6"]], **common
    )
    html = client.get(own.get_absolute_url()).content.decode()
    command = _server_command(html)
    assert "--spec-type ngram-map-k" in command and "--spec-ngram-map-k-size-m 16" in command
    assert "--spec-ngram-map-k-size-n 6" in command and "-md" not in command.split()
    data = client.get(f"/api/pairs/{own.pk}").json()["recommendation"]
    assert data["use_draft"] and data["k"] == 16 and data["download"].count("hf download") == 1


def test_an_untested_sidecar_pair_is_recommended_with_its_method(client, qwen_pair, tmp_path):
    import numpy as np
    from gguf import GGUFValueType as T

    from registry.catalog.pairing import pair_for

    path = write_gguf(
        tmp_path / "e.gguf",
        arch="eagle3",
        tokens=None,
        model=None,
        pre=None,
        tensors={"w": np.zeros((4, 4), dtype=np.float32)},
        kv={"eagle3.target_layers": ([2, 15, 30], T.ARRAY), "eagle3.target_hidden_size": (576, T.UINT32)},
    )
    side = register_as(inspect_source(str(path)), "someone/SmolLM2-135M-Instruct-EAGLE3", "e.gguf", size=1).file
    pair = pair_for(GGUFFile.objects.get(architecture="llama"), side)  # SmolLM2: 30 blocks, 576 wide
    assert pair.compatible
    command = _server_command(client.get(pair.get_absolute_url()).content.decode())
    assert "--spec-type draft-eagle3" in command and "-md models/e.gguf" in command


def test_a_method_the_pinned_build_lacks_is_said_not_crashed_on(client, qwen_pair):
    # methods come in from other installations' exports as free text
    ReportedResult.objects.create(pair=qwen_pair, k=8, speedup=2.0, method="draft-future", citation="elsewhere")
    data = client.get(f"/api/pairs/{qwen_pair.pk}").json()["recommendation"]
    assert not data["use_draft"] and "draft-future" in data["basis"] and "-md" not in data["command"].split()


def test_a_model_renamed_in_the_admin_shows_renamed_in_the_table(client, qwen_pair):
    from django.core.cache import cache

    staff = User.objects.create_user("staff", password="x" * 12, is_staff=True, is_superuser=True)
    client.force_login(staff)
    m = qwen_pair.draft.model
    form = {
        "repo": m.repo,
        "name": "Tiny Coder Draft",
        "family": m.family_id or "",
        "architecture": m.architecture,
        "parameter_count": m.parameter_count,
    }
    r = client.post(f"/admin/registry/model/{m.pk}/change/", form)
    assert r.status_code == 302, r.content[-2000:]
    cache.clear()
    client.logout()
    assert "Tiny Coder Draft" in client.get("/").content.decode()
    assert client.get("/api/pairs", {"q": "tiny coder draft"}).json()["count"] == 1
