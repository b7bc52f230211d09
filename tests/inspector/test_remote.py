"""inspector.remote through the real huggingface_hub client against the local fake Hub, with real GGUF files."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from huggingface_hub import constants

import tests.hub
from inspector import readahead
from inspector.hf_spec import parse_hf_spec
from inspector.hub_api import list_gguf_files, search_models
from inspector.hub_names import shard_names
from inspector.info import InspectError, inspect_source
from inspector.readahead import FIRST_READ
from inspector.remote import open_remote
from inspector.sources import SourceError, open_source
from tests.models import MODELS, model_path

ROOT = Path(__file__).resolve().parents[2]
SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def smol_hub(fake_hub):
    fake_hub.add_repo(
        SMOL,
        {
            SMOL_FILE: model_path("smollm2"),
            "README.md": b"# SmolLM2 GGUF\n",
            "sub/other.gguf": model_path("smollm2"),
            "config.json": b"{}",
        },
        tags=["text-generation"],
        base_model="HuggingFaceTB/SmolLM2-135M-Instruct",
        downloads=500,
    )
    return fake_hub


def _one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_it_reads_the_same_bytes_as_the_local_file(smol_hub):
    local = model_path("smollm2").read_bytes()
    src = open_remote(f"hf://{SMOL}/{SMOL_FILE}")
    for offset, n in [(0, 4), (4, 20), (12_345, 100_000), (len(local) // 2, 7), (len(local) - 10, 10)]:
        assert src.read_at(offset, n) == local[offset : offset + n]
    assert src.read_at(len(local) - 3, 100) == local[-3:]  # short only at EOF
    assert src.read_at(len(local) + 5, 10) == b""
    # The first FIRST_READ bytes came with the answer that opened the file; reads inside them cost nothing.
    assert src.bytes_fetched == smol_hub.bytes_served(SMOL, SMOL_FILE) == 12_345 + 100_000 + 7 + 10 + 3


def test_it_records_size_etag_commit_and_follows_the_cdn_redirect(smol_hub):
    src = open_source(f"hf://{SMOL}/{SMOL_FILE}")
    assert src.size == MODELS["smollm2"].size
    assert src.etag == MODELS["smollm2"].sha256  # the LFS sha256, from X-Linked-Etag
    assert src.commit == smol_hub.repos[SMOL].commit
    assert src.url.startswith(smol_hub.cdn_url + "/")
    assert src.read_at(0, 4) == b"GGUF"
    # One GET: the Hub's redirect carries commit, etag and size, the CDN's 206 the first bytes. No HEAD.
    assert [(r.server, r.method) for r in smol_hub.requests] == [("hub", "GET"), ("cdn", "GET")]
    assert smol_hub.file_requests(SMOL, SMOL_FILE) == {"hub": 1, "cdn": 1}


def test_it_reads_a_real_gemma_header_region(fake_hub):
    path = model_path("gemma3", headers_only=True)
    fake_hub.add_repo("unsloth/gemma-3-270m-it-GGUF", {"gemma-3-270m-it-Q4_K_M.gguf": path})
    src = open_remote("hf://unsloth/gemma-3-270m-it-GGUF/gemma-3-270m-it-Q4_K_M.gguf")
    with open(path, "rb") as f:
        for offset in (0, 1 << 20, 6_000_000):
            f.seek(offset)
            assert src.read_at(offset, 65_536) == f.read(65_536)
    assert src.read_at(0, 4) == b"GGUF"  # still in the first bytes: no request
    assert fake_hub.bytes_served("unsloth/gemma-3-270m-it-GGUF", "gemma-3-270m-it-Q4_K_M.gguf") == 3 * 65_536


def test_it_pins_reads_of_small_git_files_to_the_resolved_commit(smol_hub):
    src = open_remote(f"hf://{SMOL}/README.md")
    assert src.commit in src.url and src.size == len(b"# SmolLM2 GGUF\n")
    assert src.read_at(0, 1000) == b"# SmolLM2 GGUF\n"


def test_it_takes_HF_ENDPOINT_at_call_time(smol_hub):
    assert constants.ENDPOINT != smol_hub.url  # huggingface_hub froze the real Hub's address at import
    assert open_remote(f"hf://{SMOL}/{SMOL_FILE}").size == MODELS["smollm2"].size


def test_it_reports_an_unknown_repository_in_one_line(smol_hub):
    with pytest.raises(SourceError) as exc:
        open_remote("hf://nobody/nothing/model.gguf")
    assert _one_line(exc).startswith("hf://nobody/nothing/model.gguf: repository nobody/nothing not found")


def test_it_reports_a_missing_file(smol_hub):
    with pytest.raises(SourceError) as exc:
        open_remote(f"hf://{SMOL}/missing.gguf")
    assert "file 'missing.gguf' not found" in _one_line(exc)


def test_it_reports_an_unknown_revision_and_accepts_encoded_pr_refs(smol_hub):
    with pytest.raises(SourceError) as exc:
        open_remote(f"hf://{SMOL}@nope/{SMOL_FILE}")
    assert "revision 'nope' not found" in _one_line(exc)
    smol_hub.repos[SMOL].refs.add("refs/pr/1")
    assert open_remote(f"hf://{SMOL}@refs%2Fpr%2F1/{SMOL_FILE}").read_at(0, 4) == b"GGUF"
    assert open_remote(f"hf://{SMOL}@refs/pr/1/{SMOL_FILE}").read_at(0, 4) == b"GGUF"


def test_it_stops_resolving_an_old_commit_after_a_push(smol_hub):
    old = open_remote(f"hf://{SMOL}/{SMOL_FILE}").commit
    assert open_remote(f"hf://{SMOL}@{old}/{SMOL_FILE}").commit == old
    new = smol_hub.new_commit(SMOL)
    assert new != old and open_remote(f"hf://{SMOL}/{SMOL_FILE}").commit == new
    with pytest.raises(SourceError, match="not found"):
        open_remote(f"hf://{SMOL}@{old}/{SMOL_FILE}")


def test_it_asks_for_HF_TOKEN_on_a_gated_repo(fake_hub):
    fake_hub.add_repo("google/gated-GGUF", {"m.gguf": model_path("smollm2")}, gated=True)
    with pytest.raises(SourceError) as exc:
        open_remote("hf://google/gated-GGUF/m.gguf")
    assert "gated or private: set HF_TOKEN" in _one_line(exc)


def test_it_says_a_token_without_access_cannot_read_a_gated_repo(fake_hub, monkeypatch):
    fake_hub.add_repo("google/gated-GGUF", {"m.gguf": model_path("smollm2")}, gated=True)
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(SourceError) as exc:
        open_remote("hf://google/gated-GGUF/m.gguf")
    assert "token in HF_TOKEN has no access" in _one_line(exc)


def test_it_reads_a_gated_repo_with_HF_TOKEN_and_keeps_the_token_off_the_cdn(fake_hub, monkeypatch):
    fake_hub.add_repo("google/gated-GGUF", {"m.gguf": model_path("smollm2")}, gated=True)
    monkeypatch.setenv("HF_TOKEN", fake_hub.token)
    src = open_remote("hf://google/gated-GGUF/m.gguf")
    assert src.read_at(0, 4) == b"GGUF"
    sent = {r.server: {k.lower() for k in r.headers} for r in fake_hub.requests}
    assert "authorization" in sent["hub"] and "authorization" not in sent["cdn"]


def test_it_refuses_a_server_that_ignores_range_without_downloading_the_file(smol_hub):
    src = open_remote(f"hf://{SMOL}/{SMOL_FILE}")
    first = src.bytes_fetched
    smol_hub.ignore_range = True
    asked = smol_hub.file_requests(SMOL, SMOL_FILE)["cdn"]
    with pytest.raises(SourceError) as exc:
        src.read_at(FIRST_READ, 4)
    assert "server ignored the Range request; refusing to download the whole file" in _one_line(exc)
    with pytest.raises(SourceError) as exc:  # the same when the very first request is answered with 200
        open_remote(f"hf://{SMOL}/{SMOL_FILE}")
    assert "server ignored the Range request" in _one_line(exc)
    assert smol_hub.file_requests(SMOL, SMOL_FILE)["cdn"] == asked + 2  # one answer each, refused, no retry
    assert src.bytes_fetched == first == FIRST_READ
    time.sleep(0.2)  # let the server notice the hang-up
    assert smol_hub.bytes_served(SMOL, SMOL_FILE) < MODELS["smollm2"].size // 10


def test_it_reports_an_unsatisfiable_range(smol_hub, monkeypatch):
    src = open_remote(f"hf://{SMOL}/{SMOL_FILE}")
    monkeypatch.setattr(tests.hub, "_parse_range", lambda header, size: None)  # the server refuses every range
    with pytest.raises(SourceError) as exc:
        src.read_at(FIRST_READ + 100, 10)
    assert "not satisfiable (HTTP 416)" in _one_line(exc)


def test_it_treats_a_416_past_the_end_as_end_of_file(smol_hub):
    src = open_remote(f"{smol_hub.cdn_url}/{SMOL}/any/{SMOL_FILE}")
    src.size = None  # as for a server that gave no length
    assert src.read_at(MODELS["smollm2"].size + 1, 8) == b""
    assert src.size == MODELS["smollm2"].size


def test_it_notices_a_file_that_changed_on_the_server(smol_hub, tmp_path):
    src = open_remote(f"hf://{SMOL}/{SMOL_FILE}")
    shorter = tmp_path / "short.gguf"
    shorter.write_bytes(b"GGUF" + bytes(100))
    smol_hub.repos[SMOL].files[SMOL_FILE] = shorter
    with pytest.raises(SourceError, match="file changed on the server"):
        src.read_at(FIRST_READ, 4)


def test_it_reports_a_refused_connection_in_one_line(monkeypatch, fake_hub):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(SourceError) as exc:
        open_remote(f"hf://{SMOL}/{SMOL_FILE}")
    assert "cannot connect to 127.0.0.1" in _one_line(exc)


def test_it_reads_plain_http_urls(smol_hub):
    local = model_path("smollm2")
    src = open_source(f"{smol_hub.url}/{SMOL}/resolve/main/{SMOL_FILE}")  # redirected to the CDN
    assert src.size == local.stat().st_size and src.url.startswith(smol_hub.cdn_url)
    with open(local, "rb") as f:
        f.seek(1000)
        assert src.read_at(1000, 5000) == f.read(5000)
    with pytest.raises(SourceError, match="HTTP 404"):
        open_remote(f"{smol_hub.cdn_url}/no/such/file.gguf")


@pytest.mark.parametrize(
    "spec, why",
    [
        ("hf://a/../b", "invalid repository id"),
        ("hf://owner/repo/../x.gguf", "may not contain '..'"),
        ("hf:///etc/passwd", "absolute path"),
        ("hf://owner/repo//etc/passwd", "must be relative"),
        ("hf://owner/repo", "missing the file path"),
        ("hf://owner/repo@main", "missing the file path"),
        ("hf://owner", "expected hf://OWNER/REPO"),
        ("hf://datasets/owner/repo/x.gguf", "only model repositories"),
        ("hf://api/models@main/evil/private", "only model repositories"),
        ("hf://api/models@%2e%2e/evil/private", "only model repositories"),
        ("hf://owner/repo@%2e%2e/x.gguf", "the revision may not contain '..'"),
        ("hf://owner/repo@..%2F..%2Fapi/x.gguf", "the revision may not contain '..'"),
        ("hf://owner/repo@refs/convert/../x.gguf", "the revision may not contain '..'"),
        ("hf://owner/repo@%252e%252e/x.gguf", "the revision may not contain '..'"),
        ("hf://owner/repo@./x.gguf", "the revision may not contain '..'"),
        ("hf://owner/repo/q4/%2E%2E/x.gguf", "may not contain '..'"),
    ],
)
def test_it_rejects_invalid_specs(spec, why):
    with pytest.raises(SourceError) as exc:
        parse_hf_spec(spec)
    assert _one_line(exc).startswith(f"{spec}: ") and why in str(exc.value)


def test_it_parses_revisions_and_nested_paths():
    s = parse_hf_spec("hf://org/model-GGUF@refs%2Fpr%2F3/q4/model-Q4_K_M.gguf")
    assert (s.repo_id, s.revision, s.path) == ("org/model-GGUF", "refs/pr/3", "q4/model-Q4_K_M.gguf")
    assert parse_hf_spec(str(s)) == s
    assert parse_hf_spec("hf://org/m/x.gguf").revision is None


def test_it_lists_only_gguf_files_with_sizes_and_the_commit(smol_hub):
    listing = list_gguf_files(SMOL)
    assert listing.commit == smol_hub.repos[SMOL].commit
    assert [f.path for f in listing.files] == [SMOL_FILE, "sub/other.gguf"]
    assert {f.size for f in listing.files} == {MODELS["smollm2"].size}
    assert {f.etag for f in listing.files} == {MODELS["smollm2"].sha256}
    assert not any(f.gated for f in listing.files)
    assert [f.path for f in list_gguf_files(SMOL, include="sub/*").files] == ["sub/other.gguf"]
    assert open_remote(listing.spec(SMOL_FILE)).commit == listing.commit


def test_it_lists_a_gated_repo_without_a_token_but_marks_it(fake_hub):
    fake_hub.add_repo("google/gated-GGUF", {"m.gguf": model_path("smollm2")}, gated=True)
    assert [f.gated for f in list_gguf_files("google/gated-GGUF").files] == [True]


def test_it_reports_unknown_and_private_repos_when_listing(fake_hub, monkeypatch):
    fake_hub.add_repo("me/private-GGUF", {"m.gguf": b"GGUF"}, private=True)
    for repo in ("nobody/nothing", "me/private-GGUF"):
        with pytest.raises(SourceError) as exc:
            list_gguf_files(repo)
        assert f"repository {repo} not found (if it is private or gated, set HF_TOKEN)" in _one_line(exc)
    monkeypatch.setenv("HF_TOKEN", fake_hub.token)
    assert [f.path for f in list_gguf_files("me/private-GGUF").files] == ["m.gguf"]
    with pytest.raises(SourceError, match="revision 'v9' not found"):
        list_gguf_files("me/private-GGUF", revision="v9")
    with pytest.raises(SourceError, match="invalid repository id"):
        list_gguf_files("a/../b")


def test_it_searches_models_by_tag_base_model_and_name(fake_hub):
    fake_hub.add_repo(
        "a/Qwen2.5-0.5B-DRAFT-GGUF",
        {"d.gguf": b"GGUF"},
        tags=["draft"],
        base_model="Qwen/Qwen2.5-0.5B-Instruct",
        downloads=10,
    )
    fake_hub.add_repo("b/Qwen2.5-7B-GGUF", {"t.gguf": b"GGUF"}, base_model="Qwen/Qwen2.5-7B-Instruct", downloads=99)
    fake_hub.add_repo("c/not-gguf", {"model.safetensors": b"{}"})
    assert [m["id"] for m in search_models(filter="draft")] == ["a/Qwen2.5-0.5B-DRAFT-GGUF"]
    assert [m["id"] for m in search_models(search="draft")] == ["a/Qwen2.5-0.5B-DRAFT-GGUF"]
    by_base = search_models(filter=["gguf", "base_model:Qwen/Qwen2.5-7B-Instruct"])
    assert [(m["id"], m["gguf"], m["base_models"]) for m in by_base] == [
        ("b/Qwen2.5-7B-GGUF", True, ["Qwen/Qwen2.5-7B-Instruct"])
    ]
    assert [m["id"] for m in search_models(filter="gguf", sort="downloads")] == [
        "b/Qwen2.5-7B-GGUF",
        "a/Qwen2.5-0.5B-DRAFT-GGUF",
    ]
    assert len(search_models(limit=1)) == 1


def test_it_expands_split_gguf_names_into_all_shards(tmp_path):
    assert shard_names("hf://o/r/q4/m-00001-of-00003.gguf") == [
        "hf://o/r/q4/m-00001-of-00003.gguf",
        "hf://o/r/q4/m-00002-of-00003.gguf",
        "hf://o/r/q4/m-00003-of-00003.gguf",
    ]
    local = str(tmp_path / "m-00001-of-00002.gguf")
    assert shard_names(local) == [local, str(tmp_path / "m-00002-of-00002.gguf")]
    for single in ("hf://o/r/m.gguf", "/x/m-00002-of-00003.gguf", "/x/m-00001-of-00002.bin"):
        assert shard_names(single) == [single]


def test_it_opens_every_shard_of_a_split_repo(fake_hub):
    names = [f"m-0000{i}-of-00002.gguf" for i in (1, 2)]
    fake_hub.add_repo("o/split-GGUF", {names[0]: b"GGUF" + bytes(60), names[1]: b"GGUF" + bytes(8)})
    sources = [open_remote(s) for s in shard_names(f"hf://o/split-GGUF/{names[0]}")]
    assert [s.size for s in sources] == [64, 12]
    assert all(s.read_at(0, 4) == b"GGUF" for s in sources)


@pytest.mark.parametrize("key", ["qwen05", "qwen15", "gemma3", "smollm2"])
def test_a_header_read_takes_two_range_requests_and_at_most_5_percent_more_bytes(fake_hub, key):
    path = model_path(key, headers_only=key != "smollm2")
    repo, name = f"test/{key}-GGUF", MODELS[key].name
    fake_hub.add_repo(repo, {name: path})
    info = inspect_source(f"hf://{repo}/{name}")
    assert info.tokens is not None and info.bytes_fetched >= info.header_size
    # The Hub answers the first GET with a redirect (commit, etag, size; no file bytes), the CDN sends
    # the first 64 KiB and then, in one more request, up to the estimated end of the header.
    assert fake_hub.file_requests(repo, name) == {"hub": 1, "cdn": 2}
    assert info.header_size <= fake_hub.bytes_served(repo, name) <= 1.05 * info.header_size


DRIP_BYTES = 50  # a slow server's drip: a byte every 0.2 s, 10 s in all


class _SlowServer(ThreadingHTTPServer):
    """Serves one file over Range requests, dribbling every byte from ``slow_from`` on (loopback only, bounded)."""

    daemon_threads = True

    def __init__(self, data: bytes, slow_from: int) -> None:
        self.data, self.slow_from, self.stop = data, slow_from, threading.Event()
        self.dripped = 0  # bytes sent one at a time; a drip runs out at DRIP_BYTES (10 s) if its client waits
        super().__init__(("127.0.0.1", 0), _SlowHandler)


class _SlowHeaders(BaseHTTPRequestHandler):
    """Dribbles even the status line and headers, a byte every 0.2 s (for 10 s at most)."""

    protocol_version = "HTTP/1.1"
    server: _SlowServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        head = b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-3/4\r\nContent-Length: 4\r\n\r\nGGUF"
        try:
            for i in range(min(len(head), DRIP_BYTES)):
                if self.server.stop.wait(0.2):
                    break
                self.wfile.write(head[i : i + 1])
                self.wfile.flush()
                self.server.dripped += 1
        except OSError:
            pass
        self.close_connection = True


class _SlowHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _SlowServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        data = self.server.data
        start, end = (int(x) for x in self.headers["Range"].removeprefix("bytes=").split("-"))
        end = min(end, len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        try:
            for pos in range(start, end + 1, 1 << 16):
                if pos >= self.server.slow_from:
                    break
                self.wfile.write(data[pos : min(pos + (1 << 16), end + 1, self.server.slow_from)])
            pos = max(start, self.server.slow_from)
            # One byte every 0.2 s, for 10 s at most: the test's deadline is far shorter.
            for i in range(DRIP_BYTES):
                if pos + i > end or self.server.stop.wait(0.2):
                    break
                self.wfile.write(data[pos + i : pos + i + 1])
                self.wfile.flush()
                self.server.dripped += 1
        except OSError:
            pass
        self.close_connection = True


@pytest.mark.parametrize("slow_from", [0, FIRST_READ, -1], ids=["first request", "second request", "headers"])
def test_a_slow_server_meets_the_header_deadline(fake_hub, monkeypatch, smollm2_path, slow_from):
    server = _SlowServer(smollm2_path.read_bytes()[:4_000_000], slow_from)
    if slow_from < 0:
        server.RequestHandlerClass = _SlowHeaders
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    monkeypatch.setenv("SPECREG_HEADER_DEADLINE_SECONDS", "1.5")
    try:
        with pytest.raises(InspectError) as exc:
            inspect_source(f"http://127.0.0.1:{server.server_port}/m.gguf")
        dripped = server.dripped
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
    assert "the header was not read within 1.5 s (SPECREG_HEADER_DEADLINE_SECONDS)" in _one_line(exc)
    assert dripped < DRIP_BYTES  # the read gave up mid-drip, at its deadline, not when the server stopped


def test_a_bad_header_deadline_setting_is_one_line(monkeypatch, smol_hub):
    monkeypatch.setenv("SPECREG_HEADER_DEADLINE_SECONDS", "soon")
    with pytest.raises(SourceError) as exc:
        open_remote(f"hf://{SMOL}/{SMOL_FILE}")
    assert "SPECREG_HEADER_DEADLINE_SECONDS: expected a positive number of seconds, got 'soon'" in _one_line(exc)


def test_the_read_ahead_trusts_no_count_it_has_not_seen_validated():
    # A vocabulary claiming a billion tokens: the plan is capped, the parser refuses the count later.
    key = b"tokenizer.ggml.tokens"
    head = (
        b"GGUF"
        + struct.pack("<IQQ", 3, 10**9, 10**15)
        + struct.pack("<Q", len(key))
        + key
        + struct.pack("<IIQ", 9, 8, 10**9)
    )
    buf = head + b"".join(struct.pack("<Q", 5) + b"token" for _ in range(FIRST_READ // 13))
    assert readahead.next_read(buf, len(buf) + 8) == readahead.MAX_PLANNED
    assert readahead.next_read(b"", 4) == FIRST_READ
    # not a layout it knows: grow as a plain reader would
    assert readahead.next_read(b"NOPE" + bytes(4 * FIRST_READ), 10) == FIRST_READ + 1


def test_inspect_gguf_gives_up_on_a_dribbling_server_in_one_line(fake_hub, smollm2_path):
    server = _SlowServer(smollm2_path.read_bytes()[:4_000_000], 0)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/m.gguf"
    try:
        r = subprocess.run(
            [sys.executable, "manage.py", "inspect_gguf", url],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "SPECREG_HEADER_DEADLINE_SECONDS": "1"},
        )
        dripped = server.dripped
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
    assert dripped < DRIP_BYTES  # the command gave up mid-drip, at its deadline
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (
        f"inspect_gguf: {url}: the header was not read within 1 s "
        "(SPECREG_HEADER_DEADLINE_SECONDS); the server is too slow\n"
    )


def test_check_pair_over_the_hub_reads_each_header_with_two_range_requests(
    fake_hub, qwen05_header_path, qwen15_header_path
):
    fake_hub.add_repo("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", {"q4_k_m.gguf": qwen05_header_path})
    fake_hub.add_repo("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", {"q4_k_m.gguf": qwen15_header_path})
    r = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "check_pair",
            "hf://Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/q4_k_m.gguf",
            "hf://Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/q4_k_m.gguf",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.startswith("Compatible: "), r.stderr
    for repo in ("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"):
        assert fake_hub.file_requests(repo, "q4_k_m.gguf") == {"hub": 1, "cdn": 2}


class _DelayedFiles(ThreadingHTTPServer):
    """Serves files from one folder by Range, each answer after ``delay`` seconds."""

    def __init__(self, folder: Path, delay: float) -> None:
        super().__init__(("127.0.0.1", 0), _DelayedHandler)
        self.folder, self.delay, self.requests = folder, delay, 0


class _DelayedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _DelayedFiles

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.requests += 1
        time.sleep(self.server.delay)
        data = (self.server.folder / self.path.lstrip("/")).read_bytes()
        start, end = (int(x) for x in self.headers["Range"].removeprefix("bytes=").split("-"))
        end = min(end, len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        try:
            self.wfile.write(data[start : end + 1])
        except OSError:  # the client gave up (its deadline passed)
            pass


def test_all_shards_of_one_inspection_share_one_header_deadline(fake_hub, monkeypatch, tmp_path):
    """Each shard alone answers well within the deadline; four together do not: the check must end."""
    import numpy as np
    from gguf import GGUFValueType as T

    from tests.ggufgen import vocab, write_gguf

    for i in range(4):
        write_gguf(
            tmp_path / f"m-0000{i + 1}-of-00004.gguf",
            tokens=vocab(64) if i == 0 else None,
            kv={"split.no": (i, T.UINT16), "split.count": (4, T.UINT16)},
            tensors={f"t{i}": np.ones(4, dtype=np.float32)},
        )
    server = _DelayedFiles(tmp_path, 0.5)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    monkeypatch.setenv("SPECREG_HEADER_DEADLINE_SECONDS", "1.2")
    url = f"http://127.0.0.1:{server.server_port}/m-00001-of-00004.gguf"
    try:
        with pytest.raises(InspectError) as exc:  # was: read, one fresh 1.2 s deadline per shard
            inspect_source(url)
    finally:
        server.shutdown()
        server.server_close()
    assert "the header was not read within 1.2 s" in _one_line(exc)
    assert server.requests < 4  # the deadline passed before the last shard was asked for
    monkeypatch.setenv("SPECREG_HEADER_DEADLINE_SECONDS", "10")
    server = _DelayedFiles(tmp_path, 0.0)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        info = inspect_source(f"http://127.0.0.1:{server.server_port}/m-00001-of-00004.gguf")
    finally:
        server.shutdown()
        server.server_close()
    assert info.split_count == 4 and info.n_tensors == 4


def test_a_split_file_of_too_many_shards_is_refused_before_any_request(fake_hub):
    from inspector.hub_names import MAX_SHARDS

    with pytest.raises(InspectError) as exc:  # was: 99,999 names built, then a request for the first
        inspect_source("hf://o/r/m-00001-of-99999.gguf")
    assert fake_hub.requests == []
    assert _one_line(exc) == (
        f"hf://o/r/m-00001-of-99999.gguf: a split file of 99,999 shards; at most {MAX_SHARDS:,} are read"
    )
