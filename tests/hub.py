"""A local stand-in for the Hugging Face Hub that the real huggingface_hub client talks to through HF_ENDPOINT."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

import pytest

CHUNK = 1 << 16
DEFAULT_TOKEN = "hf_fake_test_token"
DATE = "2025-01-01T00:00:00.000Z"


@functools.cache
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    # size and mtime are in the key so a rewritten file is hashed again
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Request:
    server: str  # "hub" or "cdn"
    method: str
    path: str  # as sent, query included
    headers: dict[str, str]


@dataclass
class FakeRepo:
    repo_id: str
    files: dict[str, Path]  # path in repo -> file served in place (never copied)
    commit: str
    tags: list[str] = field(default_factory=list)
    base_model: list[str] = field(default_factory=list)
    gated: bool = False
    private: bool = False
    downloads: int = 0
    refs: set[str] = field(default_factory=set)  # revision names besides "main" and the commit

    @staticmethod
    def is_lfs(path: str) -> bool:
        return path.endswith(".gguf")  # on the Hub GGUFs are LFS/xet; small text files are plain git blobs

    def size(self, path: str) -> int:
        return self.files[path].stat().st_size

    def sha256(self, path: str) -> str:
        st = self.files[path].stat()
        return _sha256(str(self.files[path]), st.st_size, st.st_mtime_ns)

    def pointer(self, path: str) -> bytes:
        return (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256(path)}\nsize {self.size(path)}\n"
        ).encode()

    def blob_id(self, path: str) -> str:
        data = self.pointer(path) if self.is_lfs(path) else self.files[path].read_bytes()
        return _git_blob_sha1(data)

    def has_revision(self, rev: str) -> bool:
        return rev in ("main", self.commit) or rev in self.refs

    def all_tags(self) -> list[str]:
        tags = list(self.tags)
        if any(self.is_lfs(p) for p in self.files):
            tags.append("gguf")
        for base in self.base_model:
            tags += [f"base_model:{base}", f"base_model:quantized:{base}"]
        return list(dict.fromkeys(tags))

    def sibling(self, path: str, blobs: bool) -> dict:
        entry: dict = {"rfilename": path}
        if blobs:
            entry.update(size=self.size(path), blobId=self.blob_id(path))
            if self.is_lfs(path):
                entry["lfs"] = {
                    "sha256": self.sha256(path),
                    "size": self.size(path),
                    "pointerSize": len(self.pointer(path)),
                }
        return entry

    def tree_entry(self, path: str) -> dict:
        entry: dict = {"type": "file", "oid": self.blob_id(path), "size": self.size(path), "path": path}
        if self.is_lfs(path):
            entry["lfs"] = {"oid": self.sha256(path), "size": self.size(path), "pointerSize": len(self.pointer(path))}
        return entry

    def info(self, blobs: bool = False, siblings: bool = True) -> dict:
        owner = self.repo_id.split("/")[0]
        data = {
            "_id": hashlib.sha1(self.repo_id.encode()).hexdigest()[:24],
            "id": self.repo_id,
            "modelId": self.repo_id,
            "author": owner,
            "sha": self.commit,
            "lastModified": DATE,
            "createdAt": DATE,
            "private": self.private,
            "gated": "manual" if self.gated else False,
            "disabled": False,
            "downloads": self.downloads,
            "likes": 0,
            "tags": self.all_tags(),
            "library_name": "gguf",
            "cardData": {"base_model": self.base_model[0] if len(self.base_model) == 1 else self.base_model}
            if self.base_model
            else {},
        }
        if siblings:
            data["siblings"] = [self.sibling(p, blobs) for p in sorted(self.files)]
        return data


class FakeHub:
    """The Hub API and resolve endpoints on one port, the CDN that LFS files redirect to on another.

    Two ports because huggingface_hub follows redirects that stay on the Hub's origin and stops at
    one that leaves it, reading size and etag from that 302, as it does with the real CDN.
    """

    def __init__(self, token: str = DEFAULT_TOKEN) -> None:
        self.token = token
        self.ignore_range = False  # when True, Range headers are ignored and whole files are sent (200)
        # A slow-drip server: when > 0, file answers are sent one byte every this many seconds
        # (their status line and headers too with drip_headers), never tripping a per-read timeout.
        self.drip_seconds = 0.0
        self.drip_headers = False
        self.drip_api = False  # with drip_seconds: the API's JSON answers (listings, searches) drip too, headers first
        self.latency_seconds = 0.0  # added before every answer, on both servers: a Hub far away (the crawl bench)
        self.page_size = 1000  # models per page of /api/models; more follow by a cursor in the Link header
        self.link_header: str | None = None  # when set, every listing page answers this Link header (a hostile Hub)
        self.dripping = 0  # file answers being dripped right now (one ends when its client hangs up)
        self._stop = threading.Event()
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[Request] = []
        self._served: dict[tuple[str, str], int] = {}
        self._file_requests: dict[tuple[str, str], dict[str, int]] = {}
        self._lock = threading.Lock()
        self._tmp = Path(tempfile.mkdtemp(prefix="fakehub-"))
        self._hub = _Server(self, "hub")
        self._cdn = _Server(self, "cdn")
        self.url = f"http://127.0.0.1:{self._hub.server_port}"
        self.cdn_url = f"http://127.0.0.1:{self._cdn.server_port}"
        for server in (self._hub, self._cdn):
            threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # quick shutdown

    def close(self) -> None:
        self._stop.set()  # dripping answers end now
        for server in (self._hub, self._cdn):
            server.shutdown()
            server.server_close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> FakeHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- set-up helpers ----
    def add_repo(
        self,
        repo_id: str,
        files: dict[str, str | os.PathLike | bytes],
        *,
        tags: list[str] = (),
        base_model: str | list[str] | None = None,
        gated: bool = False,
        private: bool = False,
        downloads: int = 0,
        refs: set[str] = frozenset(),
    ) -> FakeRepo:
        """Serve ``files`` (path in repo -> local file, served in place, or bytes) as model ``repo_id``."""
        mapped: dict[str, Path] = {}
        for name, src in files.items():
            if isinstance(src, bytes):
                target = self._tmp / repo_id / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(src)
                src = target
            mapped[name] = Path(src)
        bases = [base_model] if isinstance(base_model, str) else list(base_model or [])
        repo = FakeRepo(
            repo_id, mapped, self._new_commit(repo_id), list(tags), bases, gated, private, downloads, set(refs)
        )
        self.repos[repo_id] = repo
        return repo

    def add_tree(self, root: str | os.PathLike) -> None:
        """Serve every ``root/OWNER/REPO/...`` directory as a model repository."""
        for repo_dir in sorted(Path(root).glob("*/*")):
            if repo_dir.is_dir():
                files = {p.relative_to(repo_dir).as_posix(): p for p in sorted(repo_dir.rglob("*")) if p.is_file()}
                self.add_repo(repo_dir.relative_to(root).as_posix(), files)

    def new_commit(self, repo_id: str) -> str:
        """Move the repository to a new commit (as a push would); the old one stops resolving."""
        repo = self.repos[repo_id]
        repo.commit = self._new_commit(repo_id)
        return repo.commit

    def _new_commit(self, repo_id: str) -> str:
        old = self.repos[repo_id].commit if repo_id in self.repos else ""
        return hashlib.sha1(f"{repo_id}:{old}".encode()).hexdigest()  # stable across runs

    def bytes_served(self, repo_id: str, path: str) -> int:
        """File bytes sent for ``path`` so far (written to the socket), from resolve and the CDN together."""
        with self._lock:
            return self._served.get((repo_id, path), 0)

    def file_requests(self, repo_id: str, path: str) -> dict[str, int]:
        """Requests made for ``path`` so far, by server: {"hub": resolve requests, "cdn": CDN requests}."""
        with self._lock:
            return dict(self._file_requests.get((repo_id, path), {}))

    def reset_counts(self) -> None:
        with self._lock:
            self._served.clear()
            self._file_requests.clear()
            self.requests.clear()

    def _count(self, repo_id: str, path: str, n: int) -> None:
        with self._lock:
            self._served[(repo_id, path)] = self._served.get((repo_id, path), 0) + n

    def _count_request(self, repo_id: str, path: str, server: str) -> None:
        with self._lock:
            counts = self._file_requests.setdefault((repo_id, path), {})
            counts[server] = counts.get(server, 0) + 1

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, hub: FakeHub, role: str) -> None:
        self.hub = hub
        self.role = role
        super().__init__(("127.0.0.1", 0), _Handler)


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """(start, end) of a single ``bytes=a-b``, ``bytes=a-`` or ``bytes=-n``; None when unsatisfiable."""
    m = re.fullmatch(r"bytes=(\d*)-(\d*)", header.strip())
    if m is None or (not m[1] and not m[2]):
        return None
    if not m[1]:
        start, end = max(0, size - int(m[2])), size - 1
    else:
        start, end = int(m[1]), min(int(m[2]), size - 1) if m[2] else size - 1
    return (start, end) if start < size and start <= end else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive like the Hub; every answer carries Content-Length
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    # ---- routing ----
    def _dispatch(self, head: bool) -> None:
        hub = self.server.hub
        hub._record(Request(self.server.role, self.command, self.path, dict(self.headers.items())))
        if hub.latency_seconds > 0:
            time.sleep(hub.latency_seconds)
        url = urlsplit(self.path)
        segs = [unquote(s) for s in url.path.split("/")[1:]]  # %2F inside a segment stays in that segment
        query = parse_qs(url.query)
        if self.server.role == "cdn":
            return self._cdn(segs, head)
        if segs[:2] == ["api", "models"]:
            if len(segs) == 2:
                return self._list_models(query)
            if len(segs) >= 4:
                return self._model_api(f"{segs[2]}/{segs[3]}", segs[4:], query)
        elif len(segs) >= 5 and segs[2] == "resolve":
            return self._resolve(f"{segs[0]}/{segs[1]}", segs[3], "/".join(segs[4:]), head)
        self._error(404, None, "Not Found")

    def _authorized(self) -> bool:
        return self.headers.get("Authorization") == f"Bearer {self.server.hub.token}"

    def _repo_or_error(self, repo_id: str, files: bool) -> FakeRepo | None:
        """The repo if this request may see it (``files``: may read its files), else answers the error."""
        repo = self.server.hub.repos.get(repo_id)
        has_auth = "Authorization" in self.headers
        if repo is None or (repo.private and not self._authorized()):
            # The Hub answers 401 to anonymous requests for missing repos so as not to leak private ones.
            self._error(404 if has_auth else 401, "RepoNotFound", "Repository not found")
            return None
        if files and repo.gated and not self._authorized():
            if has_auth:
                self._error(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in the "
                    f"authorized list. Visit {self.server.hub.url}/{repo_id} to ask for access.",
                )
            else:
                self._error(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access "
                    "to it and be authenticated to access it. Please log in.",
                )
            return None
        return repo

    # ---- endpoints ----
    def _resolve(self, repo_id: str, rev: str, path: str, head: bool) -> None:
        self.server.hub._count_request(repo_id, path, "hub")
        repo = self._repo_or_error(repo_id, files=True)
        if repo is None:
            return
        if not repo.has_revision(rev):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        common = {"X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
        if path not in repo.files:
            return self._error(404, "EntryNotFound", "Entry not found", common)
        if repo.is_lfs(path):
            location = f"{self.server.hub.cdn_url}/{repo_id}/{repo.commit}/{quote(path)}?X-Signature=fake"
            return self._send(
                302,
                b"",
                {
                    **common,
                    "Location": location,
                    "ETag": f'"{repo.blob_id(path)}"',
                    "X-Linked-Etag": f'"{repo.sha256(path)}"',
                    "X-Linked-Size": str(repo.size(path)),
                },
                head,
            )
        self._send_file(repo, path, {**common, "ETag": f'"{repo.blob_id(path)}"'}, head)

    def _cdn(self, segs: list[str], head: bool) -> None:
        # /OWNER/REPO/COMMIT/PATH: content-addressed in spirit, so any commit of the repo serves
        repo = self.server.hub.repos.get("/".join(segs[:2])) if len(segs) >= 4 else None
        path = "/".join(segs[3:])
        self.server.hub._count_request("/".join(segs[:2]), path, "cdn")
        if repo is None or path not in repo.files:
            return self._send(404, b"NoSuchKey", {"Content-Type": "text/plain"}, head)
        self._send_file(repo, path, {"ETag": f'"{repo.sha256(path)}"'}, head)

    def _model_api(self, repo_id: str, rest: list[str], query: dict[str, list[str]]) -> None:
        repo = self._repo_or_error(repo_id, files=False)  # metadata of gated repos is public
        if repo is None:
            return
        rev = None
        if rest and rest[0] in ("revision", "tree") and len(rest) >= 2:
            rev = rest[1]
            if not repo.has_revision(rev):
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        if not rest or (rest[0] == "revision" and len(rest) == 2):
            return self._json(repo.info(blobs=query.get("blobs", ["false"])[0].lower() == "true"))
        if rest[0] == "tree" and rev is not None:
            return self._tree(repo, "/".join(rest[2:]), query.get("recursive", ["false"])[0].lower() == "true")
        self._error(404, None, "Not Found")

    def _tree(self, repo: FakeRepo, under: str, recursive: bool) -> None:
        prefix = under.strip("/") + "/" if under.strip("/") else ""
        paths = sorted(p for p in repo.files if p.startswith(prefix))
        if prefix and not paths:
            return self._error(
                404, "EntryNotFound", f'{under} does not exist on "{repo.commit}"', {"X-Repo-Commit": repo.commit}
            )
        entries, dirs = [], []
        for p in paths:
            head, sep, _ = p[len(prefix) :].partition("/")
            if sep and not recursive:
                if prefix + head not in dirs:
                    dirs.append(prefix + head)
                continue
            if sep:  # recursive listings name the folders too
                for i, _ in enumerate(p[len(prefix) :].split("/")[:-1]):
                    d = prefix + "/".join(p[len(prefix) :].split("/")[: i + 1])
                    if d not in dirs:
                        dirs.append(d)
            entries.append(repo.tree_entry(p))
        folders = [
            {"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0, "path": d} for d in dirs
        ]
        self._json(folders + entries)

    def _list_models(self, query: dict[str, list[str]]) -> None:
        hub = self.server.hub
        models = [r for r in hub.repos.values() if not r.private or self._authorized()]
        if "search" in query:
            needle = query["search"][0].lower()
            models = [r for r in models if needle in r.repo_id.lower()]
        if "author" in query:
            models = [r for r in models if r.repo_id.split("/")[0] == query["author"][0]]
        for wanted in query.get("filter", []):
            models = [r for r in models if wanted in r.all_tags()]
        if "gated" in query:
            want = query["gated"][0].lower() == "true"
            models = [r for r in models if r.gated == want]
        if query.get("sort", [""])[0] in ("downloads", "likes"):
            models.sort(key=lambda r: r.downloads, reverse=True)
        # As the Hub pages it: at most page_size models an answer, the next page named by a cursor in the Link header.
        cursor = query.get("cursor", ["0"])[0]
        if not cursor.isdigit():
            return self._error(400, None, "Invalid cursor")
        start = int(cursor)
        size = min(int(query.get("limit", [str(hub.page_size)])[0]), hub.page_size)
        page = models[start : start + size]
        headers = {}
        if start + size < len(models):
            ask = {k: v for k, v in query.items() if k != "cursor"}
            ask["cursor"] = [str(start + size)]
            headers["Link"] = f'<{hub.url}/api/models?{urlencode(ask, doseq=True)}>; rel="next"'
        if hub.link_header is not None:
            headers["Link"] = hub.link_header
        full = query.get("full", ["false"])[0].lower() == "true"
        self._json([r.info(siblings=full) for r in page], headers)

    # ---- answers ----
    def _send(self, status: int, body: bytes, headers: dict[str, str], head: bool) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def _json(self, data: object, headers: dict[str, str] | None = None) -> None:
        hub = self.server.hub
        if hub.drip_api and hub.drip_seconds > 0 and self.command != "HEAD":
            body = json.dumps(data).encode()
            self.close_connection = True
            with hub._lock:
                hub.dripping += 1
            try:
                self._drip(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
            finally:
                with hub._lock:
                    hub.dripping -= 1
            return
        self._send(
            200,
            json.dumps(data).encode(),
            {"Content-Type": "application/json", **(headers or {})},
            self.command == "HEAD",
        )

    def _error(self, status: int, code: str | None, message: str, extra: dict[str, str] | None = None) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message, **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, json.dumps({"error": message}).encode(), headers, self.command == "HEAD")

    def _drip(self, data: bytes) -> bool:
        """Send ``data`` a byte at a time, ``drip_seconds`` apart; False once the client has hung up."""
        hub = self.server.hub
        for i in range(len(data)):
            try:
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
            except OSError:
                return False
            if hub._stop.wait(hub.drip_seconds):
                return False
        return True

    def _drip_file(self, repo: FakeRepo, path: str, status: int, headers: dict[str, str], start: int, end: int) -> None:
        hub = self.server.hub
        with hub._lock:
            hub.dripping += 1
        self.close_connection = True
        try:
            head = (
                f"HTTP/1.1 {status} {self.responses[status][0]}\r\n"
                + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                + "\r\n"
            )
            if hub.drip_headers:
                if not self._drip(head.encode()):
                    return
            else:
                self.wfile.write(head.encode())
            with open(repo.files[path], "rb") as f:
                f.seek(start)
                self._drip(f.read(end - start + 1))
        except OSError:
            pass
        finally:
            with hub._lock:
                hub.dripping -= 1

    def _send_file(self, repo: FakeRepo, path: str, headers: dict[str, str], head: bool) -> None:
        size = repo.size(path)
        start, end, status = 0, size - 1, 200
        range_header = self.headers.get("Range")
        if range_header and not self.server.hub.ignore_range:
            parsed = _parse_range(range_header, size)
            if parsed is None:
                return self._send(416, b"", {**headers, "Content-Range": f"bytes */{size}"}, head)
            (start, end), status = parsed, 206
            headers = {**headers, "Content-Range": f"bytes {start}-{end}/{size}"}
        if self.server.hub.drip_seconds > 0 and not head:
            return self._drip_file(
                repo,
                path,
                status,
                {
                    **headers,
                    "Content-Type": "application/octet-stream",
                    "Content-Length": str(end - start + 1),
                    "Connection": "close",
                },
                start,
                end,
            )
        self.send_response(status)
        for k, v in {
            **headers,
            "Content-Type": "application/octet-stream",
            "Content-Length": str(end - start + 1),
        }.items():
            self.send_header(k, v)
        self.end_headers()
        if head:
            return
        remaining = end - start + 1
        with open(repo.files[path], "rb") as f:
            f.seek(start)
            while remaining > 0:
                chunk = f.read(min(CHUNK, remaining))
                if not chunk:
                    break
                # Counted before sending, so a client that has its bytes always sees them counted, and
                # taken back when the write fails: the figure is what was handed to the socket.
                self.server.hub._count(repo.repo_id, path, len(chunk))
                try:
                    self.wfile.write(chunk)
                except OSError:  # the client hung up (as it should when a Range was ignored)
                    self.server.hub._count(repo.repo_id, path, -len(chunk))
                    self.close_connection = True
                    break
                remaining -= len(chunk)


def settles(condition, seconds: float = 3.0) -> bool:
    """Whether ``condition()`` comes true within ``seconds`` (a watchdog's socket shutdown is not instant)."""
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


needs_proc = pytest.mark.skipif(not Path("/proc/self/net/tcp").exists(), reason="counts sockets through Linux's /proc")


def sockets_to(url: str) -> int:
    """This process's open sockets connected to ``url``'s port (its fds matched with the kernel's TCP table):
    what a read that gave up at its deadline may have left open."""
    port = urlsplit(url).port
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    rows = [
        row.split()
        for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6")
        if Path(table).exists()
        for row in Path(table).read_text().splitlines()[1:]
    ]
    return sum(1 for cols in rows if int(cols[2].rsplit(":", 1)[1], 16) == port and cols[9] in inodes)


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A running FakeHub with HF_ENDPOINT pointing at it and huggingface_hub cut off from any real cache or token."""
    from huggingface_hub import constants
    from huggingface_hub.utils import close_session

    hub = FakeHub()
    home = tmp_path / "hf_home"
    for name, value in {
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(home),
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    # huggingface_hub read these at import time; the environment alone no longer reaches them.
    for name, value in {
        "HF_HOME": str(home),
        "HF_TOKEN_PATH": str(home / "token"),
        "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
        "HF_HUB_CACHE": str(home / "hub"),
        "HUGGINGFACE_HUB_CACHE": str(home / "hub"),
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": True,
    }.items():
        monkeypatch.setattr(constants, name, value)
    close_session()  # the shared client read proxy settings when it was made
    try:
        yield hub
    finally:
        close_session()
        hub.close()
