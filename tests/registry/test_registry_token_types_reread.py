"""Token types for files registered before the registry stored them: ``reread_headers`` reads their
headers again (a local file from its path, a Hub file through the local test Hub by Range requests) and stores the
types, so their near-miss pairs go from "cannot tell" to adaptable or refused; the knowledge base carries the types
(schema 1.4), and an older knowledge base without them still imports.

Real headers only: Qwen2.5-Coder-0.5B's, and near-miss targets written from it with gguf-py (DeepSeek-R1-Distill's
special tokens and BOS, as tests.near_miss writes them; one of them with an ordinary token's text changed as well,
which no adaptation may touch).
"""

from __future__ import annotations

import base64
import io
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from gguf import GGUFValueType

from inspector.info import inspect_source
from inspector.management.base import UserError
from registry.catalog.local_files import register_local
from registry.catalog.registration import register
from registry.hub.importing import import_hf
from registry.kb.export import export_kb
from registry.kb.importer import KBError, import_kb
from registry.models import AdaptCheck, GGUFFile, Pair, TokenTypeTable
from tests.models import model_path
from tests.near_miss import R1_KV, R1_TEXTS, R1_TYPES, rewrite

# db_service: CI runs these again on PostgreSQL (as tests/registry/test_registry_adaptable.py).
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

ORDINARY = 100_000  # an ordinary BPE token of Qwen2.5 (type NORMAL): no adaptation may change its text
V = GGUFValueType


def names(basename: str) -> dict[str, tuple]:
    # Another base model than Qwen's, named after it ("r…" > "qwen…"): at the same size the greater key is the
    # target (registry.catalog.pairing), and only the padded near-miss file may be the target.
    return {"general.name": (f"{basename}-0.5B-Instruct", V.STRING), "general.basename": (basename, V.STRING)}


@pytest.fixture(scope="module")
def headers(tmp_path_factory) -> dict[str, Path]:
    q05 = model_path("qwen05", headers_only=True)
    made = tmp_path_factory.mktemp("near-miss")
    near = dict(types=R1_TYPES, n_tokens=152_064)
    return {
        "q05": q05,
        # R1-Distill's special tokens on Qwen's vocabulary: adaptable once the types say they are special tokens
        "r1": rewrite(q05, made / "r1-like.gguf", texts=R1_TEXTS, kv={**R1_KV, **names("R1-Like")}, **near),
        # the same and an ordinary token's text: refused whatever the types
        "remix": rewrite(
            q05,
            made / "remix.gguf",
            texts={**R1_TEXTS, ORDINARY: "not-qwen-text"},
            kv={**R1_KV, **names("Remix")},
            **near,
        ),
    }


def forget_types() -> None:
    """Every file as registered before token types were stored (the migration leaves them so)."""
    GGUFFile.objects.update(token_types=None)
    TokenTypeTable.objects.all().delete()
    AdaptCheck.objects.all().delete()  # and no decision (registration decided these with the types)


def pair_of(target: GGUFFile, draft: GGUFFile) -> Pair:
    return Pair.objects.get(target_base=target.model.base, draft_base=draft.model.base)


def adaptability(client, target: GGUFFile, draft: GGUFFile) -> dict:
    return client.get(f"/api/pairs/{pair_of(target, draft).pk}").json()["adaptability"]


def reread(*args: str) -> tuple[int, str]:
    """``reread_headers`` as a user runs it: its exit status and output."""
    out = io.StringIO()
    try:
        call_command("reread_headers", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def local(headers, tmp_path) -> dict[str, GGUFFile]:
    """The three files registered from this machine's disk (copies, so a test may change or remove them)."""
    out = {}
    for key, path in headers.items():
        copy = tmp_path / path.name
        if key == "q05":  # 89 MB: linked, never changed
            copy.symlink_to(path)
        else:
            shutil.copyfile(path, copy)
        out[key] = register_local(copy).file
    return out


def test_local_files_get_their_types_and_cannot_tell_becomes_adaptable_or_refused(client, local):
    q05, r1, remix = local["q05"], local["r1"], local["remix"]
    forget_types()
    assert adaptability(client, r1, q05)["state"] == "unknown"
    assert adaptability(client, remix, q05)["state"] == "unknown"
    assert client.get(f"/api/pairs/{pair_of(r1, q05).pk}").json()["adaptable"] is None

    code, out = reread("--json")
    doc = json.loads(out)
    assert code == 0 and doc["failed"] == 0 and doc["dry_run"] is False
    by_source = {f["source"]: f for f in doc["files"]}
    assert by_source[q05.source]["status"] == "stored" and by_source[q05.source]["types"] == 151_936
    assert by_source[r1.source]["types"] == by_source[remix.source]["types"] == 152_064
    for f in GGUFFile.objects.all():
        assert f.token_types is not None and f.token_types.count == f.n_vocab
    # decided again by the command, before any page asks
    assert doc["decisions"]["adaptable"] >= 1 and doc["decisions"]["refused"] >= 1 and "unknown" not in doc["decisions"]
    assert AdaptCheck.objects.get(target=r1, draft=q05).state == AdaptCheck.ADAPTABLE
    data = client.get(f"/api/pairs/{pair_of(r1, q05).pk}").json()
    assert data["adaptable"]["summary"] == "7 special tokens, BOS" and data["adaptable"]["changed_tokens"] == 7
    refused = adaptability(client, remix, q05)
    assert refused["state"] == "refused" and refused["rule"] == "token_text"
    assert f"Token {ORDINARY:,} differs" in refused["detail"]
    # nothing left to read: a second run reads no file
    code, out = reread()
    assert code == 0 and out.strip() == "0 file(s) lacked token types: nothing to do"


def test_the_stored_types_are_registrations_own_rows(local, headers):
    registered = {f.pk: f.token_types.sha256 for f in GGUFFile.objects.select_related("token_types")}
    forget_types()
    assert reread()[0] == 0
    again = {f.pk: f.token_types.sha256 for f in GGUFFile.objects.select_related("token_types")}
    assert again == registered  # byte for byte what registration stored, one row per distinct array
    assert TokenTypeTable.objects.count() == 2  # the two near-miss files share theirs
    assert (
        bytes(TokenTypeTable.objects.get(sha256=registered[local["q05"].pk]).blob)
        == inspect_source(str(headers["q05"])).token_types
    )


def test_dry_run_reads_nothing_and_limit_bounds_the_work(local):
    forget_types()
    code, out = reread("--dry-run")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 4 and all(line.startswith("would read") for line in lines[:3])
    assert lines[-1] == "3 file(s) lack token types and would be read again (dry run: nothing read or stored)"
    assert not GGUFFile.objects.exclude(token_types=None).exists()
    code, out = reread("--limit", "1")
    assert code == 0 and GGUFFile.objects.exclude(token_types=None).count() == 1
    assert out.splitlines()[0].startswith("stored     ") and "(151,936 token types)" in out.splitlines()[0]
    assert reread("--limit", "5")[0] == 0 and not GGUFFile.objects.filter(token_types=None).exists()


def test_a_bad_limit_is_one_line_with_status_2():
    with pytest.raises(UserError, match=r"^reread_headers: argument --limit: expected a whole number of at least 1"):
        call_command("reread_headers", "--limit", "0")


def test_missing_changed_or_other_files_fail_in_one_line_each_and_lose_nothing(local, headers, tmp_path):
    q05, r1, remix = local["q05"], local["r1"], local["remix"]
    forget_types()
    before = {f.pk: (f.source, f.info, f.etag, f.size, f.inspected_at) for f in GGUFFile.objects.all()}
    Path(r1.source).unlink()
    with open(remix.source, "ab") as f:
        f.write(b"\0" * 32)  # another size
    code, out = reread()
    assert code == 1
    lines = out.splitlines()
    assert f"failed     {r1.source}: {r1.source}: no such file" in lines
    assert any(
        line.startswith(f"failed     {remix.source}: {remix.size + 32:,} bytes where {remix.size:,} were registered")
        for line in lines
    )
    assert f"stored     {q05.source} (151,936 token types)" in lines  # the others go on
    assert lines[-1].startswith("3 file(s) lacked token types: 1 stored, 2 failed")
    for f in GGUFFile.objects.filter(pk__in=[r1.pk, remix.pk]):
        assert f.token_types_id is None and (f.source, f.info, f.etag, f.size, f.inspected_at) == before[f.pk]

    # the same size, but another header: the token table is not the one registered, so nothing is stored
    other = rewrite(
        headers["q05"],
        tmp_path / "same-size.gguf",
        texts={**R1_TEXTS, ORDINARY: "not-qwen-tex!"},
        kv={**R1_KV, **names("Remix")},
        types=R1_TYPES,
        n_tokens=152_064,
    )
    shutil.copyfile(other, remix.source)
    assert Path(remix.source).stat().st_size == remix.size
    code, out = reread("--json")
    doc = json.loads(out)
    assert code == 1 and doc["failed"] == 2
    (failed,) = [f for f in doc["files"] if f["source"] == remix.source]
    assert failed["message"].startswith("its header is not the one registered")
    assert GGUFFile.objects.get(pk=remix.pk).token_types_id is None


# --- Hub files: read again as import_hf reads them ---

Q05 = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
R1 = "someone/R1-Like-0.5B-GGUF"
REMIX = "someone/Remix-0.5B-GGUF"


@pytest.fixture
def imported_hub(fake_hub, headers):
    fake_hub.add_repo(Q05, {"q05-Q4_K_M.gguf": headers["q05"]})
    fake_hub.add_repo(R1, {"r1-like-Q4_K_M.gguf": headers["r1"]})
    fake_hub.add_repo(REMIX, {"remix-Q4_K_M.gguf": headers["remix"]})
    for repo in (Q05, R1, REMIX):
        assert [o.status for o in import_hf(repo).outcomes] == ["added"]
    return fake_hub


def test_imports_and_local_files_decide_their_near_misses_as_they_end(imported_hub, tmp_path, headers):
    # import_hf and register_local end with registration.finish: the table finds the decisions stored.
    q05, r1 = GGUFFile.objects.get(repo=Q05), GGUFFile.objects.get(repo=R1)
    assert AdaptCheck.objects.filter(target=r1, draft=q05).exclude(state="").exists()
    AdaptCheck.objects.all().delete()
    copy = tmp_path / "r1-copy.gguf"
    shutil.copyfile(headers["r1"], copy)
    mine = register_local(copy).file
    assert mine.model.base_id == r1.model.base_id  # another copy of R1: its base model's near-misses decided again
    assert AdaptCheck.objects.filter(target=r1, draft=q05).exists()


def test_hub_files_are_read_again_by_their_header_only(client, imported_hub, headers):
    q05 = GGUFFile.objects.get(repo=Q05)
    r1 = GGUFFile.objects.get(repo=R1)
    forget_types()
    assert adaptability(client, r1, q05)["state"] == "unknown"
    imported_hub.reset_counts()
    code, out = reread()
    assert code == 0, out
    assert f"stored     {q05.source} (151,936 token types)" in out.splitlines()
    served = imported_hub.bytes_served(Q05, "q05-Q4_K_M.gguf")
    assert q05.header_size <= served < headers["q05"].stat().st_size  # Range reads of the header, not the file
    assert GGUFFile.objects.filter(token_types=None).count() == 0
    data = client.get(f"/api/pairs/{pair_of(r1, q05).pk}").json()
    assert data["adaptability"]["state"] == "adaptable" and data["adaptable"]["summary"] == "7 special tokens, BOS"


def test_a_changed_or_unreachable_hub_file_fails_in_one_line(imported_hub, headers):
    forget_types()
    q05, r1, remix = (GGUFFile.objects.get(repo=r) for r in (Q05, R1, REMIX))
    imported_hub.repos[R1].files["r1-like-Q4_K_M.gguf"] = headers["remix"]  # another file at that path
    imported_hub.new_commit(R1)
    del imported_hub.repos[REMIX]  # the repository is gone
    code, out = reread()
    lines = out.splitlines()
    assert code == 1
    assert f"failed     {r1.source}: changed in {R1} since it was registered: import_hf registers it anew" in lines
    (gone,) = [line for line in lines if line.startswith(f"failed     {remix.source}: ")]
    assert REMIX in gone and "\n" not in gone
    assert f"stored     {q05.source} (151,936 token types)" in lines
    assert GGUFFile.objects.filter(pk__in=[r1.pk, remix.pk], token_types=None).count() == 2
    assert GGUFFile.objects.get(pk=r1.pk).etag == r1.etag  # left as registered: import_hf updates it


# --- the knowledge base ---


def hf_files(headers) -> dict[str, GGUFFile]:
    out = {}
    for key in ("q05", "r1"):
        info = inspect_source(str(headers[key]))
        out[key] = register(
            info, source=f"hf://org/{key}/{key}.gguf", repo=f"org/{key}", path=f"{key}.gguf", etag=f"e-{key}", size=1
        ).file
    return out


def empty_installation(settings, name: str) -> None:
    """This test database becomes another, empty installation."""
    from registry.models import BaseModel, Family, Model, TokenizerClass, TokenTable

    for m in (Pair, GGUFFile, Model, BaseModel, Family, TokenizerClass, TokenTable, TokenTypeTable):
        m.objects.all().delete()
    settings.SPECREG_INSTALLATION_ID = name


def older(doc: dict) -> dict:
    """The same knowledge base as a 1.3 export wrote it: no token types anywhere."""
    old = json.loads(json.dumps(doc))
    old["schema_version"] = "1.3"
    del old["token_types"]
    for f in old["files"]:
        del f["token_types"]
    return old


@pytest.fixture
def exported(headers, settings, tmp_path) -> dict:
    settings.SPECREG_INSTALLATION_ID = "installation-a"
    files = hf_files(headers)
    export_kb(tmp_path / "kb.json")
    doc = json.loads((tmp_path / "kb.json").read_text())
    doc["_shas"] = {k: f.token_types.sha256 for k, f in files.items()}
    return doc


def write(tmp_path: Path, doc: dict, name: str = "in.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({k: v for k, v in doc.items() if k != "_shas"}))
    return path


def test_the_knowledge_base_carries_token_types_and_restores_them(client, exported, settings, tmp_path):
    shas = exported["_shas"]
    assert exported["schema_version"] == "1.6"
    assert sorted(t["sha256"] for t in exported["token_types"]) == sorted(shas.values())
    by_source = {f["source"]: f for f in exported["files"]}
    assert by_source["hf://org/r1/r1.gguf"]["token_types"] == shas["r1"]
    (t,) = [t for t in exported["token_types"] if t["sha256"] == shas["q05"]]
    assert t["count"] == 151_936 and len(base64.b64decode(t["blob"])) == 4 * 151_936

    empty_installation(settings, "installation-b")
    import_kb(write(tmp_path, exported))
    got = {f.source: f.token_types.sha256 for f in GGUFFile.objects.select_related("token_types")}
    assert got == {"hf://org/q05/q05.gguf": shas["q05"], "hf://org/r1/r1.gguf": shas["r1"]}
    q05, r1 = GGUFFile.objects.get(repo="org/q05"), GGUFFile.objects.get(repo="org/r1")
    assert adaptability(client, r1, q05)["state"] == "adaptable"


def test_an_older_knowledge_base_imports_without_types_and_a_newer_one_gives_them(client, exported, settings, tmp_path):
    empty_installation(settings, "installation-b")
    report = import_kb(write(tmp_path, older(exported), "old.json"))
    assert report.counts["files added"] == 2
    assert not GGUFFile.objects.exclude(token_types=None).exists()
    q05, r1 = GGUFFile.objects.get(repo="org/q05"), GGUFFile.objects.get(repo="org/r1")
    assert adaptability(client, r1, q05)["state"] == "unknown"
    # the same files from a 1.4 export: already here, and given the types they lacked
    report = import_kb(write(tmp_path, exported, "new.json"))
    assert report.counts["files already here"] == 2 and report.counts["files given their token types"] == 2
    assert GGUFFile.objects.filter(token_types=None).count() == 0
    assert AdaptCheck.objects.get(target=r1, draft=q05).state == AdaptCheck.ADAPTABLE  # decided again at import


def hostile(doc: dict) -> dict[str, tuple[dict, str]]:
    def with_(mutate) -> dict:
        d = json.loads(json.dumps(doc))
        mutate(d)
        return d

    def first(d: dict) -> dict:
        return d["token_types"][0]

    def r1_file(d: dict) -> dict:
        return next(f for f in d["files"] if f["source"] == "hf://org/r1/r1.gguf")

    def short(d: dict) -> None:  # one int32 fewer than the count says, the hash made to match
        blob = base64.b64decode(first(d)["blob"])[:-4]
        first(d)["blob"] = base64.b64encode(blob).decode()

    def other_types(d: dict) -> None:  # the q05 array (151,936) named by the padded file (152,064 tokens)
        r1_file(d)["token_types"] = doc["_shas"]["q05"]

    return {
        "hash": (with_(lambda d: first(d).update(sha256="0" * 64)), "their content hashes to"),
        "count past bound": (
            with_(lambda d: first(d).update(count=2**40)),
            "token_types.0.count: Input should be less than or equal to 4194304",
        ),
        "short blob": (with_(short), "base64 characters do not hold"),
        "not base64": (
            with_(lambda d: first(d).update(blob="!" * len(first(d)["blob"]))),
            "blob is not base64",
        ),
        "not in the file": (with_(lambda d: r1_file(d).update(token_types="f" * 64)), "are not in the file"),
        "count is not the tokens": (with_(other_types), "151,936 token types for 152,064 tokens"),
        "list": (with_(lambda d: d.update(token_types={"a": 1})), "token_types: Input should be a valid list"),
    }


HOSTILE = ("hash", "count past bound", "short blob", "not base64", "not in the file", "count is not the tokens", "list")


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_token_types_are_refused_in_one_line_and_change_nothing(exported, settings, tmp_path, case):
    doc, expected = hostile(exported)[case]
    empty_installation(settings, "installation-b")
    with pytest.raises(KBError) as exc:
        import_kb(write(tmp_path, doc))
    message = str(exc.value)
    assert expected in message and "\n" not in message and len(message) < 400
    assert GGUFFile.objects.count() == 0 and TokenTypeTable.objects.count() == 0
