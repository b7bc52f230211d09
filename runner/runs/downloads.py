"""Model files a benchmark needs, on local disk: downloaded with huggingface_hub, verified, budgeted."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from huggingface_hub import hf_hub_download, try_to_load_from_cache
from huggingface_hub.errors import HfHubHTTPError
from tqdm.auto import tqdm

from inspector.hf_spec import parse_hf_spec
from inspector.hub_names import hub_token, shard_names
from inspector.sources import SourceError, is_remote
from registry.catalog.stored_files import quota_problem, record, touch
from registry.hub.adapting import AdaptJobError
from registry.model_folder import model_dir, room_problem
from registry.models import SHA256, GGUFFile, StoredFile
from runner.cache import sha256_file

Progress = Callable[[int, int | None], None]  # bytes done, bytes total


class DownloadError(Exception):
    """A model file could not be made available locally; one line."""


def _progress_class(report: Progress | None):
    """A tqdm class that forwards byte counts to ``report`` (huggingface_hub's progress hook)."""

    class Reporting(tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True  # nothing on the terminal of a worker
            super().__init__(*args, **kwargs)
            self._done = 0

        def update(self, n=1):
            self._done += n or 0
            if report is not None:
                report(self._done, self.total)
            return super().update(n)

    return Reporting


def local_paths(
    source: str, size: int | None = None, sha256: str = "", progress: Progress | None = None, owner: Any = None
) -> list[Path]:
    """Local paths of every shard of ``source``, downloading what is missing.

    huggingface_hub resumes partial downloads and keeps files by commit; the download goes to a
    temporary name and only appears complete, so a failure leaves nothing half-usable behind.
    ``sha256`` (the Hub's LFS hash) is checked when given. ``owner``: the user whose run or job asks; a download it
    brings into the model folder is theirs, within their quota (registry.catalog.stored_files).
    """
    if not is_remote(source):
        paths = [Path(s) for s in shard_names(source)]
        missing = [p for p in paths if not p.is_file()]
        if missing:
            raise DownloadError(f"{missing[0]}: no such file on this worker")
        touch(paths)  # an adapted draft of the folder, used now
        return paths
    folder = model_dir()
    folder.mkdir(parents=True, exist_ok=True)
    # A file already in the folder needs no room: asking first would let one user who filled the folder make every
    # later benchmark of a cached file fail on the budget. Nor is it charged to anyone's quota.
    cached = cached_paths(source)
    if size is not None and cached is None and (why := room_problem(size) or quota_problem(owner, size)):
        raise DownloadError(f"{source}: {why}")
    out = []
    for shard in shard_names(source):
        try:
            spec = parse_hf_spec(shard)
        except SourceError as exc:
            raise DownloadError(str(exc)) from None
        try:
            path = Path(
                hf_hub_download(
                    spec.repo_id,
                    spec.path,
                    revision=spec.revision,
                    cache_dir=folder / "hub",
                    token=hub_token(anonymous=False),
                    endpoint=os.environ.get("HF_ENDPOINT") or None,
                    tqdm_class=_progress_class(progress),
                )
            )
        except (HfHubHTTPError, OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DownloadError(f"{shard}: download failed ({first})") from None
        out.append(path)
    if SHA256.fullmatch(sha256) and len(out) == 1:
        actual = sha256_file(out[0])
        if actual != sha256:
            out[0].unlink(missing_ok=True)
            raise DownloadError(f"{source}: sha256 {actual[:12]}… does not match the Hub's {sha256[:12]}…; removed")
    registered = GGUFFile.objects.filter(source=source).first()
    for path in out:  # a file that was here already stays whoever's it was (no one's, if it predates the records)
        record(path, StoredFile.DOWNLOAD, owner if cached is None else None, registered)
    return out


def cached_paths(source: str) -> list[Path] | None:
    """Every shard of an hf:// ``source`` as the model folder's Hub cache already holds it (huggingface_hub's own
    lookup, no request), or None when one is missing."""
    cache = model_dir() / "hub"
    out = []
    try:
        shards = shard_names(source)
        for shard in shards:
            spec = parse_hf_spec(shard)
            hit = try_to_load_from_cache(spec.repo_id, spec.path, cache_dir=cache, revision=spec.revision)
            if not isinstance(hit, str):
                return None
            out.append(Path(hit))
    except SourceError:
        return None  # the download names the fault
    return out


def fetch_whole(source: str, size: int | None, sha256: str, owner: Any = None) -> list[Path]:
    """``local_paths`` for a Hub job that needs a whole file (registry.hub.adapting's ``fetch``): its failure is the
    job's one line."""
    try:
        return local_paths(source, size, sha256, owner=owner)
    except DownloadError as exc:
        raise AdaptJobError(str(exc)) from None
