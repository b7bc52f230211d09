"""Importing GGUF files from the Hugging Face Hub: list a repository (or name one file), read each header remotely,
register it."""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NoReturn, TypeVar

from django.conf import settings

from inspector.deadlines import Deadline, current_job_deadline, job_deadline
from inspector.hf_spec import parse_hf_spec
from inspector.hub_api import RemoteFile, RepoListing, gguf_file, list_gguf_files
from inspector.hub_names import SHARD, first_shard, have_token, hf_source, model_repo_id, shard_names
from inspector.info import InspectError, ModelInfo, inspect_source
from inspector.sources import SourceError, Unreachable
from registry.catalog.registration import Registered, find_unchanged, finish, register
from registry.catalog.reread import RereadError
from registry.models import GGUFFile


class HubImportError(Exception):
    """The repository as a whole cannot be imported; the message is one line."""


class HubUnreachable(HubImportError):
    """The Hub itself did not answer: the next repository would fail the same way."""


class JobDeadlinePassed(HubImportError):
    """The job's deadline (SPECREG_HUB_JOB_DEADLINE_SECONDS) passed, so the job stops; one line. ``report``
    holds the files done before it, which stay registered (each file is its own transaction)."""

    def __init__(self, message: str, report: ImportReport | None = None) -> None:
        super().__init__(message)
        self.report = report


@contextmanager
def hub_job_deadline() -> Iterator[Deadline]:
    """Within: the Hub reads of one job (listings, searches, every file's header) share one end,
    SPECREG_HUB_JOB_DEADLINE_SECONDS away; each file still has SPECREG_HEADER_DEADLINE_SECONDS of its own."""
    seconds = float(settings.SPECREG_HUB_JOB_DEADLINE_SECONDS)
    with job_deadline(seconds, f"the job's deadline of {seconds:g} s passed (SPECREG_HUB_JOB_DEADLINE_SECONDS)") as d:
        yield d


def _job_out_of_time() -> Deadline | None:
    """The running job's deadline once it has passed, else None (also outside a job)."""
    job = current_job_deadline()
    return job if job is not None and job.passed() else None


@dataclass
class FileOutcome:
    """One file of an import: registered (``registered``: the file and what registering it did), or failed."""

    path: str
    source: str
    status: str  # added, updated, unchanged, failed
    message: str = ""
    registered: Registered | None = None

    @property
    def file_id(self) -> int | None:
        return self.registered.file.pk if self.registered is not None else None

    @property
    def pairs_added(self) -> int:
        return self.registered.pairs_added if self.registered is not None else 0


@dataclass
class ImportReport:
    repo_id: str
    revision: str | None
    commit: str | None
    outcomes: list[FileOutcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def failed(self) -> list[FileOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def summary(self) -> str:
        parts = [f"{self.count(s)} {s}" for s in ("added", "updated", "unchanged", "failed") if self.count(s)]
        pairs = sum(o.pairs_added for o in self.outcomes)
        at = f" at {self.commit[:12]}" if self.commit else ""
        return f"{self.repo_id}{at}: {', '.join(parts) or 'nothing to do'}; {pairs} new pair(s)"


def normalize_repo_id(text: str) -> str:
    """Accept ``OWNER/REPO``, ``hf://OWNER/REPO`` or a Hub URL; refuse anything else in one line."""
    try:
        return model_repo_id(text)
    except ValueError as exc:
        raise HubImportError(str(exc)) from None


def check_include(pattern: str | None) -> str | None:
    if pattern is None or pattern == "":
        return None
    if pattern.startswith("/") or ".." in pattern.split("/") or "\x00" in pattern:
        raise HubImportError(f"--include {pattern!r}: must be a relative glob inside the repository, without '..'")
    return pattern


def safe_path(path: str) -> bool:
    """A listed path we are willing to use (a hostile server could list anything)."""
    return (
        bool(path)
        and not path.startswith("/")
        and not any(p in ("", ".", "..") for p in path.split("/"))
        and "\\" not in path
        and "\x00" not in path
    )


@dataclass
class Entry:
    """One file to register: a plain GGUF, or the first shard of a split one with all its shards."""

    path: str
    size: int | None
    etag: str
    problem: str = ""


def group_shards(files: list[RemoteFile]) -> list[Entry]:
    """Whole files, with split ones (``-00001-of-0000N.gguf``) collapsed onto their first shard."""
    singles: list[Entry] = []
    splits: dict[str, dict[int, RemoteFile]] = {}
    for f in files:
        m = SHARD.fullmatch(f.path)
        if m is None:
            singles.append(Entry(f.path, f.size, f.etag or ""))
        else:
            splits.setdefault(first_shard(f.path), {})[int(m["part"])] = f
    for first, shards in splits.items():
        try:
            count = len(shard_names(first))  # a listing may name a split of a billion shards: refused here
        except SourceError as exc:
            singles.append(Entry(first, None, "", str(exc)))
            continue
        missing = [n for n in range(1, count + 1) if n not in shards]
        if missing:
            problem = f"split file is missing shard(s) {', '.join(map(str, missing[:5]))} of {count}"
            singles.append(Entry(first, None, "", problem))
            continue
        ordered = [shards[n] for n in range(1, count + 1)]
        sizes = [s.size for s in ordered]
        etag = "shards:" + hashlib.sha256("\n".join(s.etag or "" for s in ordered).encode()).hexdigest()
        singles.append(Entry(first, sum(s for s in sizes if s is not None) if None not in sizes else None, etag))
    return sorted(singles, key=lambda e: e.path)


_T = TypeVar("_T")


def _ask_hub(read: Callable[[], _T]) -> _T:
    """``read()``, a read of the Hub, with its errors as this module's (one line each)."""
    try:
        return read()
    except Unreachable as exc:
        if _job_out_of_time():  # not the Hub's fault: the job has no time left for anything
            raise JobDeadlinePassed(str(exc)) from None
        raise HubUnreachable(str(exc)) from None
    except SourceError as exc:
        raise HubImportError(str(exc)) from None


def list_repo(repo_id: str, revision: str | None = None, include: str | None = None) -> tuple[RepoListing, list[Entry]]:
    listing = _ask_hub(lambda: list_gguf_files(repo_id, revision))
    files = [f for f in listing.files if include is None or _matches(f.path, include)]
    if not files:
        what = f" matching {include!r}" if include else ""
        raise HubImportError(f"{repo_id}: no .gguf files{what} in the repository")
    _refuse_gated(repo_id, files)
    return listing, group_shards(files)


def _refuse_gated(repo_id: str, files: list[RemoteFile]) -> None:
    if any(f.gated for f in files) and not have_token():
        raise HubImportError(f"{repo_id} is gated: set HF_TOKEN to a token that has been granted access")


def _matches(path: str, include: str) -> bool:
    # Quant names come in every case (Q4_K_M, q4_k_m), so globs ignore case; a glob without '/'
    # may match the file name alone, as with `huggingface-cli download --include`.
    pattern, path = include.lower(), path.lower()
    return fnmatch.fnmatchcase(path, pattern) or (
        "/" not in pattern and fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern)
    )


def import_hf(
    repo: str,
    revision: str | None = None,
    include: str | None = None,
    progress=None,
    step=None,
    cap: int | None = None,
) -> ImportReport:
    """Register every ``.gguf`` of a Hub repository (matching ``include``); unchanged files are skipped.
    ``progress`` is told each file's outcome; ``step`` (one line) the steps between: the listing, the last one.

    ``cap``: the most header bytes one file may take (the requesting user's: registry.access.policy.header_cap, the
    same cap their checks obey); None: SPECREG_MAX_HEADER_BYTES (the operator's command, the curated list).

    Each file is its own transaction: a failure (a broken header, a network error) leaves the
    others registered and is reported with its reason. Inside a job whose deadline passes
    (hub_job_deadline), no further file is read: JobDeadlinePassed, carrying the report so far.
    """
    repo_id = normalize_repo_id(repo)
    include = check_include(include)
    revision = revision.strip() if revision and revision.strip() else None
    if step:
        step(f"listing {repo_id} on the Hub")
    listing, entries = list_repo(repo_id, revision, include)
    if step:
        step(f"{repo_id}: {len(entries)} .gguf file(s) to read, headers only")
    report = ImportReport(repo_id, revision, listing.commit)
    for entry in entries:
        if _job_out_of_time():
            _stop(report, len(entries))
        outcome = import_entry(listing, entry, revision, cap)
        if outcome.status == "failed" and _job_out_of_time():
            _stop(report, len(entries))  # cut short by the job's end, not by the file: not done, not failed
        report.outcomes.append(outcome)
        if progress:
            progress(outcome)
    if step:
        step("deciding which of the new near-miss pairs can be adapted")
    finish(_registered(report))
    return report


def _registered(report: ImportReport) -> list[int]:
    return [o.file_id for o in report.outcomes if o.file_id is not None and o.status in ("added", "updated")]


def _stop(report: ImportReport, total: int) -> NoReturn:
    finish(_registered(report))  # for the files registered so far, as at the end of a whole import
    job = current_job_deadline()
    seconds = f"{job.seconds:g} s " if job is not None else ""
    raise JobDeadlinePassed(
        f"{report.repo_id}: stopped at the job's deadline of {seconds}(SPECREG_HUB_JOB_DEADLINE_SECONDS) "
        f"after {len(report.outcomes)} of {total} file(s); what they registered is kept",
        report,
    )


def import_entry(listing: RepoListing, entry: Entry, revision: str | None, cap: int | None = None) -> FileOutcome:
    source = hf_source(listing.repo_id, revision, entry.path)
    if not safe_path(entry.path):
        return FileOutcome(entry.path, source, "failed", "refusing an absolute path or one with '..'")
    if entry.problem:
        return FileOutcome(entry.path, source, "failed", entry.problem)
    try:
        if (same := find_unchanged(source, entry.etag, entry.size)) is not None:
            return FileOutcome(entry.path, source, "unchanged", registered=Registered(same, "unchanged"))
        info = inspect_source(listing.spec(entry.path), cap or settings.SPECREG_MAX_HEADER_BYTES)
        reg = register(
            info,
            source=source,
            repo=listing.repo_id,
            revision=revision or "",
            path=entry.path,
            commit=listing.commit or "",
            etag=entry.etag,
            size=entry.size,
            base_models=listing.base_models,
        )
    except InspectError as exc:
        return FileOutcome(entry.path, source, "failed", _strip_spec(str(exc)))
    except Exception as exc:  # a file nobody foresaw (or a bug) must not stop the files after it
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        why = f"unexpected {type(exc).__name__}" + (f": {first}" if first else "")
        return FileOutcome(entry.path, source, "failed", why)
    return FileOutcome(entry.path, source, reg.status, registered=reg)


def _strip_spec(message: str) -> str:
    # The inspector names the pinned hf:// spec first; the outcome already says which file it is.
    head, sep, rest = message.partition(": ")
    return rest if sep and head.startswith("hf://") else message


class RegisteredHeaders:
    """A registered Hub file's header read again as ``import_entry`` reads one (registry.catalog.reread's
    ``hub_reader``): the repository listed at the registered revision, the file found in it with its registered
    etag and size (else it changed, and import_hf registers it anew), and its header read by Range requests at the
    listed commit, within SPECREG_MAX_HEADER_BYTES and the header deadline. One listing per repository and revision
    serves all its files; a repository that cannot be listed fails each of its files with the same line."""

    def __init__(self) -> None:
        self._listings: dict[tuple[str, str], tuple[RepoListing, dict[str, Entry]] | str] = {}

    def _listing(self, repo: str, revision: str) -> tuple[RepoListing, dict[str, Entry]]:
        key = (repo, revision)
        if key not in self._listings:
            try:
                listing, entries = list_repo(repo, revision or None, None)
                self._listings[key] = (listing, {e.path: e for e in entries})
            except HubImportError as exc:
                self._listings[key] = str(exc)
        found = self._listings[key]
        if isinstance(found, str):
            raise RereadError(found)
        return found

    def __call__(self, f: GGUFFile) -> ModelInfo:
        listing, entries = self._listing(f.repo, f.revision)
        entry = entries.get(f.path)
        at = f"@{f.revision}" if f.revision else ""
        if entry is None or not safe_path(entry.path):
            raise RereadError(f"no longer in {f.repo}{at} (a split file is named by its first shard)")
        if entry.problem:
            raise RereadError(entry.problem)
        if (entry.etag, entry.size) != (f.etag, f.size):
            raise RereadError(f"changed in {f.repo}{at} since it was registered: import_hf registers it anew")
        try:
            return inspect_source(listing.spec(entry.path), settings.SPECREG_MAX_HEADER_BYTES)
        except InspectError as exc:
            raise RereadError(_strip_spec(str(exc))) from None


def import_source(spec: str) -> Registered:
    """Register one ``hf://OWNER/REPO[@REV]/PATH`` file (a split file by its first shard), read alone: the
    repository is not listed (inspector.hub_api.gguf_file)."""

    try:
        s = parse_hf_spec(spec)
    except SourceError as exc:
        raise HubImportError(str(exc)) from None
    if not s.path.lower().endswith(".gguf") or first_shard(s.path) != s.path:
        raise HubImportError(f"{spec}: no such .gguf file in {s.repo_id} (a split file is named by its first shard)")
    listing = _ask_hub(lambda: gguf_file(s.repo_id, s.revision, s.path))
    _refuse_gated(s.repo_id, listing.files)
    outcome = import_entry(listing, group_shards(listing.files)[0], s.revision)
    if outcome.registered is None:
        raise HubImportError(f"{spec}: {outcome.message}")
    finish([outcome.registered.file.pk])
    return outcome.registered
