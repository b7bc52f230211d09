"""Files users' jobs bring into the model folder (``SPECREG_MODEL_DIR``): who owns them, each user's quota, removal
and expiry.

An adapt job's adapted draft and the downloads of a user's benchmark runs and adapt jobs are recorded as
``StoredFile`` rows owned by the user whose job brought them in (a file already in the folder is never charged to
the next user who reads it). A user's rows count against ``SPECREG_USER_QUOTA_BYTES``: a job or run that would pass
it fails before writing. Staff, and runs from the command line, are held by the folder's budget alone
(``SPECREG_DISK_BUDGET_BYTES``, registry.model_folder).

Removing a file deletes its bytes only inside the model folder (a link is followed only to a file inside it). An
adapted draft is unregistered too (registry.catalog.removal: its pairs settled again), unless something refers to
it (results, notes, deployments, benchmark runs): then it stays registered, with its pairs and their records, and
only its bytes go. A download is never unregistered (its Hub file is downloaded again when needed). A file a run or
job in progress needs is not removed at all. Expiry removes, the same way, what went unused for days and nothing
refers to (``referenced``: a download is kept by deployments and team notes, not by results).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from registry.catalog.removal import unregister
from registry.model_folder import model_dir
from registry.models import (
    BenchmarkResult,
    BenchmarkRun,
    GGUFFile,
    HubJob,
    Pair,
    PredictedResult,
    ReportedResult,
    StabilityResult,
    StoredFile,
)

ADAPTED_DIR = "adapted"  # registry.hub.adapting writes its adapted drafts here, inside the model folder


class FileInUse(Exception):
    """A run or job in progress needs the file; one line."""


# --- where a file is, never outside the folder ---


def _root() -> Path:
    return model_dir().resolve()


def relative(path: str | os.PathLike) -> str | None:
    """``path`` as the model folder's relative name (its folders resolved, a last link kept as it is), or None when
    it is not inside the folder."""
    p = Path(os.path.abspath(path))
    full = p.parent.resolve() / p.name
    root = _root()
    return full.relative_to(root).as_posix() if full.is_relative_to(root) and full != root else None


def entry(rel: str) -> Path | None:
    """The folder's entry for a relative name: None for a name that climbs out (absolute, ``..``) or whose folders
    lead out of the model folder through a link."""
    root = _root()
    name = Path(rel)
    if not rel or name.is_absolute() or ".." in name.parts:
        return None
    p = root / name
    return p if p.parent.resolve().is_relative_to(root) else None


def _inside_target(p: Path) -> Path | None:
    """What ``p`` holds its bytes in: itself, a regular file; or the regular file inside the folder a link names
    (the Hub cache's snapshot entries link to its blobs). None for anything else: a link out of the folder counts
    nothing and is never followed."""
    if p.is_symlink():
        target = p.resolve()
        if target.is_relative_to(_root()) and target.is_file() and not target.is_symlink():
            return target
        return None
    return p if p.is_file() else None


def size_on_disk(rel: str) -> int | None:
    """The bytes the entry holds; None when it is gone (or leads out of the folder)."""
    p = entry(rel)
    held = _inside_target(p) if p is not None else None
    return held.stat().st_size if held is not None else None


def delete_from_disk(rel: str) -> int:
    """Delete the entry (and, for a link, the file inside the folder it names); returns the bytes freed. Nothing
    outside the model folder is touched."""
    p = entry(rel)
    if p is None:
        return 0
    held = _inside_target(p)
    freed = held.stat().st_size if held is not None else 0
    if held is not None and held != p:
        held.unlink(missing_ok=True)
    if p.is_symlink() or p.is_file():
        p.unlink(missing_ok=True)
    return freed


# --- recording ---


def record(path: str | os.PathLike, kind: str, owner: Any, file: GGUFFile | None) -> StoredFile | None:
    """Record a file of the folder (or note its use again): the owner is set once, by the job that brought it in;
    None for a path outside the folder."""
    rel = relative(path)
    if rel is None:
        return None
    size = size_on_disk(rel) or 0
    now = timezone.now()
    who = owner if getattr(owner, "is_authenticated", False) else None
    again: dict[str, Any] = {"size": size, "last_used": now, **({"file": file} if file is not None else {})}
    stored, _ = StoredFile.objects.update_or_create(
        path=rel,
        defaults=again,
        create_defaults={"kind": kind, "size": size, "file": file, "owner": who, "created_at": now, "last_used": now},
    )
    return stored


def touch(paths: Iterable[str | os.PathLike]) -> int:
    """These files were used now (a benchmark read them): their expiry starts again."""
    rels = [r for r in (relative(p) for p in paths) if r is not None]
    return StoredFile.objects.filter(path__in=rels).update(last_used=timezone.now()) if rels else 0


# --- quotas ---


def quota_applies(user: Any) -> bool:
    """Signed-in accounts other than staff; staff and the command line (no user) have the folder's budget only."""
    return bool(getattr(user, "is_authenticated", False)) and not user.is_staff


def used_by(user: Any) -> int:
    """Bytes the user's files hold in the model folder; rows whose file went (by hand) are forgotten."""
    rows = list(StoredFile.objects.filter(owner_id=user.pk).values_list("pk", "path", "size"))
    gone = [pk for pk, rel, _ in rows if size_on_disk(rel) is None]
    if gone:
        StoredFile.objects.filter(pk__in=gone).delete()
    return sum(size for pk, _, size in rows if pk not in gone)


def quota_problem(user: Any, need: int) -> str | None:
    """Why ``need`` more bytes would take ``user`` past their quota, in words that follow "X …" (as
    registry.model_folder.room_problem's); None when they fit or no quota applies."""
    if not quota_applies(user):
        return None
    quota = settings.SPECREG_USER_QUOTA_BYTES
    used = used_by(user)
    if used + need > quota:
        left = max(0, quota - used)
        return (
            f"needs {need:,} bytes but only {left:,} remain of your quota of {quota:,} bytes in the model folder "
            "(SPECREG_USER_QUOTA_BYTES); remove files you no longer need at /model-folder/"
        )
    return None


def quota_summary(user: Any) -> tuple[int, int | None]:
    """(bytes used, quota or None where none applies) for the user's page."""
    return used_by(user), settings.SPECREG_USER_QUOTA_BYTES if quota_applies(user) else None


# --- what refers to a file ---


def _runs(f: GGUFFile) -> QuerySet[BenchmarkRun]:
    pairs = Pair.objects.filter(Q(target=f) | Q(draft=f))
    return BenchmarkRun.objects.filter(Q(target_file=f) | Q(draft_file=f) | Q(pair__in=pairs))


def in_use(f: GGUFFile | None) -> str | None:
    """A run or job in progress that needs the file, in words; None when there is none."""
    if f is None:
        return None
    if _runs(f).filter(status__in=(BenchmarkRun.QUEUED, BenchmarkRun.RUNNING)).exists():
        return "a benchmark run queued or running"
    active = HubJob.objects.filter(kind=HubJob.ADAPT_DRAFT, status__in=(HubJob.QUEUED, HubJob.RUNNING))
    if active.filter(Q(params__draft=f.pk) | Q(params__target=f.pk)).exists():
        return "an adapt job queued or running"
    return None


def _references(f: GGUFFile, results: bool) -> Iterator[tuple[str, Callable[[], bool]]]:
    """(what, whether it refers to the file), each asked only if none before did. Team notes and deployments are
    reached by their relations' names (registry.team sits above the catalog). ``results``: results and runs count
    too (an adapted draft's; a download's bytes are only a cache of a Hub file that stays registered with them)."""
    pairs = Pair.objects.filter(Q(target=f) | Q(draft=f))
    runs = _runs(f)
    mine = GGUFFile.objects.filter(pk=f.pk)
    if results:
        yield "benchmark results", BenchmarkResult.objects.filter(Q(run__in=runs) | Q(pair__in=pairs)).exists
        yield "predicted results", PredictedResult.objects.filter(Q(run__in=runs) | Q(pair__in=pairs)).exists
        yield "soak results", StabilityResult.objects.filter(Q(run__in=runs) | Q(pair__in=pairs)).exists
        yield "reported results", ReportedResult.objects.filter(pair__in=pairs).exists
        yield "benchmark runs", runs.exists
    yield (
        "a deployment",
        mine.filter(Q(deployments_as_target__isnull=False) | Q(deployments_as_draft__isnull=False)).exists,
    )
    yield "a deployment", pairs.filter(deployments__isnull=False).exists
    yield "team notes", mine.filter(notes__isnull=False).exists
    yield "team notes", pairs.filter(notes__isnull=False).exists
    yield "team notes", runs.filter(notes__isnull=False).exists


def referenced(f: GGUFFile | None, kind: str = StoredFile.ADAPTED) -> str | None:
    """What refers to the registered file a stored file is (or holds the bytes of), in words; None when nothing does.
    An adapted draft: results of its pairs or runs, benchmark runs, deployments, team notes. A download: deployments
    and team notes only (its results stay without it, and a later run downloads it again)."""
    if f is None:
        return None
    return next((what for what, found in _references(f, kind == StoredFile.ADAPTED) if found()), None)


# --- removing ---


def may_remove(user: Any, stored: StoredFile) -> bool:
    return bool(getattr(user, "is_authenticated", False)) and (user.is_staff or stored.owner_id == user.pk)


@dataclass(frozen=True)
class Removed:
    path: str
    freed: int
    unregistered: bool
    kept_because: str | None  # an adapted draft kept registered: what refers to it


def remove(stored: StoredFile) -> Removed:
    """Delete the file from the model folder and forget its row; an adapted draft nothing refers to is unregistered
    too. Raises FileInUse (nothing removed) while a run or job in progress needs it."""
    f = stored.file
    if why := in_use(f):
        raise FileInUse(f"{stored.path} is in use ({why}); remove it once that has finished")
    freed = delete_from_disk(stored.path)
    kept = referenced(f) if stored.kind == StoredFile.ADAPTED else None  # a download is never unregistered
    drop = stored.kind == StoredFile.ADAPTED and f is not None and kept is None
    path = stored.path
    stored.delete()
    if drop and f is not None:
        unregister([f.pk])
    return Removed(path, freed, drop, kept)


# --- expiry ---


def adopt_untracked(save: bool = True) -> list[StoredFile]:
    """Adapted drafts in the folder with no row (written before files were recorded): owned by no one, last used
    when written. Returned (and saved unless ``save`` is False, for a dry run)."""
    folder = _root() / ADAPTED_DIR
    if not folder.is_dir() or not folder.resolve().is_relative_to(_root()):
        return []
    known = set(StoredFile.objects.filter(path__startswith=f"{ADAPTED_DIR}/").values_list("path", flat=True))
    out = []
    for p in sorted(folder.glob("*.gguf")):
        rel = f"{ADAPTED_DIR}/{p.name}"
        if rel in known or p.is_symlink() or not p.is_file():
            continue
        when = datetime.fromtimestamp(p.stat().st_mtime, tz=timezone.get_current_timezone())
        row = StoredFile(
            path=rel,
            kind=StoredFile.ADAPTED,
            size=p.stat().st_size,
            file=GGUFFile.objects.filter(source=str(p.resolve())).first(),
            created_at=when,
            last_used=when,
        )
        if save:
            row.save()
        out.append(row)
    return out


@dataclass(frozen=True)
class Expired:
    stored: StoredFile
    size: int


def expiring(days: int, now: datetime | None = None, dry_run: bool = False) -> list[Expired]:
    """The files unused for ``days`` days that nothing refers to and nothing in progress needs: what
    ``expire_model_files`` removes. Rows whose file is gone already are forgotten (unless ``dry_run``)."""
    cutoff = (now or timezone.now()) - timedelta(days=days)
    adopted = adopt_untracked(save=not dry_run)
    rows = list(StoredFile.objects.filter(last_used__lt=cutoff).select_related("file", "owner").order_by("path"))
    if dry_run:
        rows += [r for r in adopted if r.last_used < cutoff]
    out = []
    for stored in rows:
        size = size_on_disk(stored.path)
        if size is None:
            if not dry_run and stored.pk is not None:
                stored.delete()
            continue
        if in_use(stored.file) is None and referenced(stored.file, stored.kind) is None:
            out.append(Expired(stored, size))
    return out
