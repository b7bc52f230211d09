"""import_hf, register_gguf and find_drafts through the real huggingface_hub client against the local test Hub."""

from __future__ import annotations

import io
import json
import socket
import threading

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection

from inspector.management.base import UserError
from registry.hub.drafts import family_stem, find_drafts, size_from_name
from registry.hub.importing import HubImportError, HubUnreachable, import_hf
from registry.hub.jobs import execute_job
from registry.hub.queue import queue_job
from registry.models import GGUFFile, HubJob, Pair, ReportedResult, TokenTable
from tests.ggufgen import vocab, write_gguf
from tests.hostile import tensor_file
from tests.hub_repos import Q05_FILE, Q15_FILE, SMOL_FILE
from tests.models import MODELS
from tests.registering import Q05, Q15, SMOL

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_it_imports_a_repo_reading_only_headers_and_records_the_commit(hub, smollm2_path):
    out = run("import_hf", SMOL)
    f = GGUFFile.objects.get()
    assert f.source == f"hf://{SMOL}/{SMOL_FILE}" and f.commit == hub.repos[SMOL].commit
    assert f.size == MODELS["smollm2"].size and f.etag == MODELS["smollm2"].sha256
    assert f.n_vocab == 49_152 and f.architecture == "llama" and f.info["header_size"] == f.header_size
    served = hub.bytes_served(SMOL, SMOL_FILE)
    assert f.header_size <= served <= 2 * f.header_size + 512 * 1024  # a header, not 98 MB
    assert "added" in out and "1 added" in out


def test_reimporting_an_unchanged_repo_reads_no_file_bytes(hub):
    run("import_hf", SMOL)
    hub.reset_counts()
    out = run("import_hf", SMOL)
    assert hub.bytes_served(SMOL, SMOL_FILE) == 0 and "1 unchanged" in out
    assert GGUFFile.objects.count() == 1


def test_a_changed_file_is_reinspected_after_a_push(hub, tmp_path):
    run("import_hf", Q05)
    first = GGUFFile.objects.get()
    hub.repos[Q05].files[Q05_FILE] = write_gguf(tmp_path / "new.gguf", tokens=vocab(5000))
    hub.new_commit(Q05)
    report = import_hf(Q05)
    assert [o.status for o in report.outcomes] == ["updated"]
    f = GGUFFile.objects.get()
    assert f.pk == first.pk and f.n_vocab == 5000 and f.commit == hub.repos[Q05].commit


def test_it_imports_only_files_matching_include_whatever_their_case(hub, smollm2_path):
    hub.add_repo("org/many-GGUF", {"m-Q4_K_M.gguf": smollm2_path, "m-Q8_0.gguf": smollm2_path})
    report = import_hf("org/many-GGUF", include="*q8_0*")
    assert [o.path for o in report.outcomes] == ["m-Q8_0.gguf"]
    with pytest.raises(HubImportError, match="no .gguf files matching"):
        import_hf("org/many-GGUF", include="*IQ2*")


def test_it_imports_a_split_file_as_one_file(hub, tmp_path):
    first = write_gguf(tmp_path / "s1.gguf", tokens=vocab(5000), kv=None)
    second = write_gguf(tmp_path / "s2.gguf", model=None, pre=None)
    hub.add_repo(
        "org/split-GGUF",
        {
            "big-Q4_K_M-00001-of-00002.gguf": first,
            "big-Q4_K_M-00002-of-00002.gguf": second,
            "broken-00001-of-00003.gguf": first,
            "huge-00002-of-999999999.gguf": second,
        },
    )
    report = import_hf("org/split-GGUF")
    by_path = {o.path: o for o in report.outcomes}
    assert by_path["big-Q4_K_M-00001-of-00002.gguf"].status == "added"
    assert "missing shard(s) 2, 3 of 3" in by_path["broken-00001-of-00003.gguf"].message
    # a listing naming a split of a billion shards is refused at once, not walked shard by shard
    assert "999,999,999 shards" in by_path["huge-00001-of-999999999.gguf"].message
    f = GGUFFile.objects.get()
    assert f.split_count == 2 and f.size == first.stat().st_size + second.stat().st_size
    assert f.model.name == "big"


def test_a_gated_repo_needs_a_token(hub, monkeypatch, smollm2_path):
    hub.add_repo("google/gated-GGUF", {"g.gguf": smollm2_path}, gated=True)
    with pytest.raises(UserError, match="gated: set HF_TOKEN"):
        call_command("import_hf", "google/gated-GGUF")
    assert not GGUFFile.objects.exists()
    monkeypatch.setenv("HF_TOKEN", hub.token)
    assert import_hf("google/gated-GGUF").count("added") == 1


@pytest.mark.parametrize(
    "repo, include, message",
    [
        ("not a repo", None, "is not a model repository name"),
        ("a/../b", None, "is not a model repository name"),
        ("/etc/passwd", None, "is not a model repository name"),
        ("datasets/x", None, "is not a model repository name"),
        ("org/repo", "../*.gguf", "without '..'"),
        ("org/repo", "/abs/*.gguf", "without '..'"),
        ("nobody/nothing", None, "repository nobody/nothing not found"),
    ],
)
def test_it_refuses_bad_names_in_one_line(hub, repo, include, message):
    args = ["import_hf", repo] + (["--include", include] if include else [])
    with pytest.raises(UserError) as exc:
        call_command(*args)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_a_non_gguf_file_fails_alone_and_the_rest_is_imported(hub, smollm2_path):
    hub.add_repo("org/mixed-GGUF", {"fake.gguf": b"<html>not a model</html>", "ok.gguf": smollm2_path})
    with pytest.raises(SystemExit) as exit_:
        run("import_hf", "org/mixed-GGUF")
    assert exit_.value.code == 1
    report_sources = set(GGUFFile.objects.values_list("path", flat=True))
    assert report_sources == {"ok.gguf"}
    report = import_hf("org/mixed-GGUF")
    (failed,) = report.failed
    assert "not a GGUF file" in failed.message


def test_an_unreachable_hub_is_one_clear_line(hub, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(UserError, match="cannot connect to 127.0.0.1"):
        call_command("import_hf", SMOL)


def test_unreachable_is_told_apart_by_type_not_by_the_words_of_the_message(hub, monkeypatch):
    with pytest.raises(HubImportError) as missing:
        import_hf("org/no-such-repo")
    assert not isinstance(missing.value, HubUnreachable)  # the Hub answered: the next repository may work
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(HubUnreachable):
        import_hf(SMOL)


def test_importing_the_qwen_repos_pairs_them_and_attaches_the_reported_examples(hub, qwen15_header_path):
    q32 = "Qwen/Qwen2.5-Coder-32B-Instruct-GGUF"  # the shipped figures' target; the 1.5B's header stands in
    # Its card names its own base model: the header alone would make it another quant of the 1.5B.
    hub.add_repo(
        q32,
        {"qwen2.5-coder-32b-instruct-q4_k_m.gguf": qwen15_header_path},
        base_model="Qwen/Qwen2.5-Coder-32B-Instruct",
    )
    import_hf(Q05)
    import_hf(Q15)
    assert not ReportedResult.objects.exists()  # no published figure for the 1.5B
    import_hf(q32)
    pair = Pair.objects.get(target__repo=q32, draft__repo=Q05)
    assert pair.compatible
    assert ReportedResult.objects.filter(pair=pair).count() == 2
    pair.refresh_from_db()
    assert pair.best_kind == "reported" and pair.best_speedup == pytest.approx(1.623)


@pytest.mark.db_service
@pytest.mark.django_db(transaction=True)
def test_two_imports_of_the_same_repo_racing_register_each_file_once(hub):
    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        pytest.skip(
            "in-memory SQLite's shared cache reports 'table is locked' instead of waiting; run on a file or PostgreSQL"
        )
    errors, reports = [], []

    def work() -> None:
        try:
            reports.append(import_hf(Q05))
        except Exception as exc:  # noqa: BLE001 - the assertion shows it
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(r.outcomes[0].status for r in reports) == ["added", "unchanged"]
    assert GGUFFile.objects.count() == 1 and TokenTable.objects.count() == 1


def test_register_gguf_registers_local_files_by_absolute_path(qwen05_header_path, qwen15_header_path):
    out = run("register_gguf", str(qwen05_header_path), str(qwen15_header_path))
    assert out.count("added") == 2
    pair = Pair.objects.get()
    assert pair.target.source == str(qwen15_header_path.resolve()) and pair.compatible
    assert "unchanged" in run("register_gguf", str(qwen05_header_path))
    with pytest.raises(UserError, match="no such file"):
        call_command("register_gguf", "/nonexistent/x.gguf")


def test_find_drafts_registers_a_draft_found_on_the_hub(hub, qwen05_header_path, smollm2_path):
    import_hf(Q15)
    hub.add_repo(
        "someone/Qwen2.5-Coder-1.5B-Instruct-DRAFT-0.5B-GGUF",
        {"draft-Q8_0.gguf": qwen05_header_path},
        tags=["draft"],
        downloads=5,
    )
    hub.add_repo("other/SmolLM2-135M-DRAFT-GGUF", {"s.gguf": smollm2_path}, tags=["draft"])
    hub.add_repo("big/Qwen2.5-Coder-7B-Instruct-GGUF", {"q7.gguf": qwen05_header_path})
    out = run("find_drafts", f"hf://{Q15}/{Q15_FILE}")
    registered_repos = set(GGUFFile.objects.values_list("repo", flat=True))
    assert "someone/Qwen2.5-Coder-1.5B-Instruct-DRAFT-0.5B-GGUF" in registered_repos and Q05 in registered_repos
    assert "other/SmolLM2-135M-DRAFT-GGUF" not in registered_repos  # not of this family
    assert "big/Qwen2.5-Coder-7B-Instruct-GGUF" not in registered_repos  # not smaller
    assert "Found on the Hub: 2 compatible" in out
    again = find_drafts(f"hf://{Q15}/{Q15_FILE}", hub=False)
    # Both drafts found are the 0.5B (the card of one, the header of the other): one pair, two repositories.
    (pair,) = again.registered
    repos = set(pair.draft_base.models.values_list("repo", flat=True))
    assert repos == {Q05, "someone/Qwen2.5-Coder-1.5B-Instruct-DRAFT-0.5B-GGUF"}


def test_find_drafts_reports_an_unknown_target_in_one_line(hub):
    with pytest.raises(UserError, match="not a registered file"):
        call_command("find_drafts", "nothing-here")


def test_names_give_sizes_and_family_stems():
    assert size_from_name("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF") == 0.5e9
    assert size_from_name("x/Qwen2.5-Coder-32B-Instruct-DRAFT-0.5B-GGUF") == 0.5e9
    assert size_from_name("HuggingFaceTB/SmolLM2-135M-Instruct") == 135e6
    assert size_from_name("org/no-size") is None
    assert family_stem("Qwen2.5-Coder-1.5B-Instruct") == "Qwen2.5-Coder"
    assert family_stem("qwen2.5-coder-1.5b-instruct") == "qwen2.5-coder"


def test_the_find_drafts_button_reports_what_it_found(hub, qwen05_header_path, client):
    from django.contrib.auth.models import User

    import_hf(Q15)
    hub.add_repo(
        "someone/Qwen2.5-Coder-1.5B-Instruct-DRAFT-0.5B-GGUF", {"draft-Q8_0.gguf": qwen05_header_path}, tags=["draft"]
    )
    target = GGUFFile.objects.get()
    assert client.post(f"/files/{target.pk}/find-drafts").status_code == 302  # to the login page
    assert GGUFFile.objects.count() == 1
    client.force_login(User.objects.create_user("bob", password="x" * 12))
    queued = client.post(f"/files/{target.pk}/find-drafts")
    job_id = int(queued["Location"].split("/")[2])
    assert execute_job(job_id) == "done"  # what the worker runs
    html = client.get(queued["Location"]).content.decode()
    assert "someone/Qwen2.5-Coder-1.5B-Instruct-DRAFT-0.5B-GGUF (named *DRAFT*): compatible" in html
    assert f'href="{target.get_absolute_url()}#drafts"' in html  # back to the target's page …
    page = client.get(target.get_absolute_url()).content.decode()
    assert 'href="/pairs/' in page.split('id="drafts"')[1].split("</section>")[0]  # … which lists the draft


def test_a_header_above_the_cap_fails_that_file_with_a_clear_message(hub, settings):
    settings.SPECREG_MAX_HEADER_BYTES = 1_000_000  # SmolLM2's header is 1.8 MB
    report = import_hf(SMOL)
    (failed,) = report.failed
    assert "1,000,000-byte header cap" in failed.message and not GGUFFile.objects.exists()


def test_an_import_job_obeys_its_users_header_cap_as_their_checks_do(hub, settings):
    settings.SPECREG_PUBLIC_MAX_HEADER_BYTES = 1_000_000  # SmolLM2's header is 1.8 MB
    user = User.objects.create_user("bob", password="x" * 12)
    job = queue_job(HubJob.IMPORT_REPO, {"repo": SMOL}, user=user)
    execute_job(job.pk)
    job.refresh_from_db()
    assert "1,000,000-byte header cap" in json.dumps(job.result) and not GGUFFile.objects.exists()
    staff = User.objects.create_user("sam", password="x" * 12, is_staff=True)
    job = queue_job(HubJob.IMPORT_REPO, {"repo": SMOL}, user=staff)
    assert execute_job(job.pk) == "done" and GGUFFile.objects.count() == 1  # staff read with the server's cap


def test_one_hostile_file_is_recorded_and_the_files_after_it_are_imported(hub, tmp_path, smollm2_path):

    huge = tensor_file(tmp_path / "huge.gguf", (b"t", [2**63, 2**63, 2**63, 2**63], 0, 0))
    wide = tensor_file(tmp_path / "wide.gguf", (b"a", [2**63 - 64], 24, 0), (b"b", [2**63 - 64], 24, 2**63 - 64))
    hub.add_repo("org/hostile-GGUF", {"a-huge.gguf": huge, "b-wide.gguf": wide, "c-ok.gguf": smollm2_path})
    report = import_hf("org/hostile-GGUF")
    status = {o.path: o.status for o in report.outcomes}
    assert status == {"a-huge.gguf": "failed", "b-wide.gguf": "added", "c-ok.gguf": "added"}
    assert "negative size" in report.failed[0].message
    assert GGUFFile.objects.get(path="b-wide.gguf").parameter_count == 2**63 - 1  # saturated, stored


def test_an_unforeseen_failure_of_one_file_is_recorded_and_the_files_after_it_are_imported(
    hub, monkeypatch, smollm2_path
):
    from registry.hub import importing as hub_import

    real = hub_import.register

    def register(info, **kw):
        if kw["path"] == "a-odd.gguf":
            raise RuntimeError("a bug nobody foresaw\nTraceback (most recent call last): ...")
        return real(info, **kw)

    monkeypatch.setattr(hub_import, "register", register)
    hub.add_repo("org/odd-GGUF", {"a-odd.gguf": smollm2_path, "b-ok.gguf": smollm2_path})
    report = import_hf("org/odd-GGUF")  # was: the RuntimeError ended the import, b-ok.gguf never registered
    assert {o.path: o.status for o in report.outcomes} == {"a-odd.gguf": "failed", "b-ok.gguf": "added"}
    assert report.failed[0].message == "unexpected RuntimeError: a bug nobody foresaw"
    assert set(GGUFFile.objects.values_list("path", flat=True)) == {"b-ok.gguf"}


def _sidecar(path, arch: str, layers: list[int], width: int = 576, hidden: int | None = 576):
    import numpy as np
    from gguf import GGUFValueType as T

    kv = {f"{arch}.target_layers": (layers, T.ARRAY), f"{arch}.embedding_length": (width, T.UINT32)}
    if hidden is not None and arch == "eagle3":
        kv["eagle3.target_hidden_size"] = (hidden, T.UINT32)
    return write_gguf(
        path,
        arch=arch,
        tokens=None,
        model=None,
        pre=None,
        hparams=False,
        kv=kv,
        tensors={"w": np.zeros((4, 4), dtype=np.float32)},
    )


def test_find_drafts_lists_sidecars_apart_with_their_method_and_verdict(hub, tmp_path):
    import json

    import_hf(SMOL)  # llama, 30 blocks, 576 wide
    eagle = "someone/SmolLM2-135M-Instruct-EAGLE3-GGUF"  # named after the target
    hub.add_repo(eagle, {"eagle3-f16.gguf": _sidecar(tmp_path / "e.gguf", "eagle3", [2, 15, 30])})
    tree = "lab/speculator-dflash-GGUF"  # its model tree points at the target's repo
    hub.add_repo(tree, {"d.gguf": _sidecar(tmp_path / "d.gguf", "dflash", [1, 30])}, base_model=SMOL)
    hub.add_repo(
        "other/Qwen2.5-Coder-1.5B-Instruct-EAGLE3-GGUF",  # another model's head
        {"e.gguf": _sidecar(tmp_path / "q.gguf", "eagle3", [2, 14, 28], 1536, 1536)},
    )
    family = "x/SmolLM2-EAGLE3-GGUF"  # met by the draft search (same family name): checked as a sidecar
    hub.add_repo(family, {"e.gguf": _sidecar(tmp_path / "f.gguf", "eagle3", [2, 15, 30], 960, 960)})
    out = run("find_drafts", f"hf://{SMOL}/{SMOL_FILE}")
    assert "other/Qwen2.5" not in out and "Sidecars for this target: 3 (1 compatible)" in out
    assert f"draft-eagle3  hf://{eagle}/eagle3-f16.gguf  compatible" in out
    assert f"draft-dflash  hf://{tree}/d.gguf  incompatible: dflash_layers" in out
    assert f"draft-eagle3  hf://{family}/e.gguf  incompatible: eagle3_width" in out
    assert "Registered compatible drafts: 0" in out  # sidecars are not vocabulary pairs
    # registered now: a second search lists them from the registry, with the same verdicts
    again = json.loads(run("find_drafts", f"hf://{SMOL}/{SMOL_FILE}", "--json"))
    assert sorted((s["method"], s["status"], s["why"]) for s in again["sidecars"]) == [
        ("draft-dflash", "incompatible", "registered"),
        ("draft-eagle3", "compatible", "registered"),
        ("draft-eagle3", "incompatible", "registered"),
    ]
    assert again["registered"] == []
    assert (
        Pair.objects.get(draft__repo=eagle).compatible
        and Pair.objects.get(draft__repo=tree).failed_rule == "dflash_layers"
    )
    # The method is a column pairing reads without the stored inspection (registry.models.GGUFFile.speculative_type).
    methods = dict(GGUFFile.objects.filter(repo__in=[eagle, tree, SMOL]).values_list("repo", "speculative_type"))
    assert methods == {eagle: "draft-eagle3", tree: "draft-dflash", SMOL: "draft-simple"}
