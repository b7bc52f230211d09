"""Reading again the headers of registered files whose token types were not stored.

Files registered before the registry stored ``tokenizer.ggml.token_type`` have none, and registration skips a file
whose etag and size are unchanged, so they would never get them: their near-miss pairs read "cannot tell"
(registry.catalog.adaptable). ``reread`` reads each such header again, through the same bounded readers as
registration (``inspect_source`` with SPECREG_MAX_HEADER_BYTES, a deadline per read), and stores only its token
types, with registration's own ``store_types``; nothing else of the file changes, so a failure loses nothing.

A local file is read from its path only when it still exists with the registered size. A Hub file is read by the
caller's ``hub_reader`` (registry.hub.importing.RegisteredHeaders, as import_hf reads it: this layer may not import
the Hub's), which checks that the file's LFS etag and size are still the registered ones. Either way the header
read must carry the registered token table and header size, or it is another file and nothing is stored.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from inspector.info import TYPES_KEY, InspectError, ModelInfo, inspect_source
from registry.cache_keys import bump_generation
from registry.catalog.adaptable import decide_again
from registry.catalog.local_files import LocalFileError, local_etag
from registry.catalog.registration import store_types
from registry.models import GGUFFile

BATCH = 100  # files read per query (keyset batches: rows change while the batch is read)

HeaderReader = Callable[[GGUFFile], ModelInfo]


class RereadError(Exception):
    """Why one file's header cannot be read again, as one line."""


@dataclass
class Outcome:
    file_id: int
    source: str
    status: str  # stored, no types, failed, would read
    message: str = ""
    types: int = 0  # token types stored


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    decisions: Counter[str] = field(default_factory=Counter)  # adaptability decided again, by state
    dry_run: bool = False

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def summary(self) -> str:
        n = len(self.outcomes)
        if self.dry_run:
            return f"{n:,} file(s) lack token types and would be read again (dry run: nothing read or stored)"
        counts = Counter(o.status for o in self.outcomes)
        parts = [f"{counts[s]:,} {s}" for s in ("stored", "no types", "failed") if counts[s]]
        states = ", ".join(f"{v:,} {k}" for k, v in sorted(self.decisions.items()))
        decided = f"; adaptability decided again for {sum(self.decisions.values()):,} pair(s) ({states})"
        return f"{n:,} file(s) lacked token types: {', '.join(parts) or 'nothing to do'}{decided if states else ''}"


def lacking_types(limit: int | None = None) -> Iterator[GGUFFile]:
    """Registered files whose header has token types that were not stored (``adaptable.types_missing``), by id."""
    last, given = 0, 0
    while limit is None or given < limit:
        size = BATCH if limit is None else min(BATCH, limit - given)
        batch = list(
            GGUFFile.objects.filter(pk__gt=last, token_types__isnull=True, info__metadata__has_key=TYPES_KEY)
            .select_related("token_table")
            .defer("token_table__blob", "info")  # the token table's hash is compared, the inspection is not read
            .order_by("pk")[:size]
        )
        if not batch:
            return
        yield from batch
        last, given = batch[-1].pk, given + len(batch)


def read_local(f: GGUFFile) -> ModelInfo:
    """A local file's header, read again only while the file has the registered size (a changed file is
    registered anew by register_gguf, which reads it whole)."""
    path = f.path or f.source
    if not os.path.isabs(path):  # a source another installation named (import_kb): nothing here to read
        raise RereadError("not a path on this machine")
    try:
        _, size = local_etag(path)
    except LocalFileError as exc:
        raise RereadError(str(exc)) from None
    if size != f.size:
        was = f"{f.size:,}" if f.size is not None else "no size"
        raise RereadError(f"{size:,} bytes where {was} were registered: it changed (register_gguf registers it anew)")
    try:
        return inspect_source(path, settings.SPECREG_MAX_HEADER_BYTES)
    except InspectError as exc:
        raise RereadError(str(exc)) from None


def same_header(f: GGUFFile, info: ModelInfo) -> None:
    """RereadError unless the header read is the one registered: its token table and header size. A whole
    inspection is not compared: files without types were inspected by older code, whose fields differ."""
    ours = f.token_table.sha256 if f.token_table is not None else None
    theirs = info.tokens.sha256 if info.tokens is not None else None
    if ours != theirs or info.header_size != f.header_size:
        raise RereadError("its header is not the one registered (another token table or header size): register it anew")


def attach(f: GGUFFile, types: bytes) -> None:
    """Store the types as registration does and link them, only if the file is still as it was read; the new
    ``inspected_at`` makes every adaptability decision on the file stale (catalog.adaptable.decisions)."""
    with transaction.atomic():
        row = store_types(types)
        unchanged = GGUFFile.objects.filter(
            pk=f.pk, token_types__isnull=True, token_table_id=f.token_table_id, header_size=f.header_size
        )
        if not unchanged.update(token_types=row, inspected_at=timezone.now()):
            raise RereadError("registered again while it was read: left as registration stored it")


def reread_one(f: GGUFFile, hub_reader: HeaderReader) -> Outcome:
    """One file read again and its types stored; every failure is its outcome, never the next file's."""
    out = Outcome(f.pk, f.source, "failed")
    try:
        info = hub_reader(f) if f.repo else read_local(f)
        same_header(f, info)
        if info.token_types is None:
            out.status, out.message = "no types", "its token types are not an int32 array: nothing to store"
            return out
        attach(f, info.token_types)
    except RereadError as exc:
        out.message = str(exc)
        return out
    except Exception as exc:  # a file nobody foresaw (or a bug) must not stop the files after it
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        out.message = f"unexpected {type(exc).__name__}" + (f": {first}" if first else "")
        return out
    out.status, out.types = "stored", len(info.token_types) // 4
    return out


def reread(
    hub_reader: HeaderReader,
    *,
    limit: int | None = None,
    dry_run: bool = False,
    progress: Callable[[Outcome], None] | None = None,
) -> Report:
    """Read again the headers of (up to ``limit``) files lacking token types, store their types and decide again the
    adaptability of the pairs touching them. ``dry_run``: list them, read and store nothing."""
    report = Report(dry_run=dry_run)
    stored: list[int] = []
    for f in lacking_types(limit):
        outcome = Outcome(f.pk, f.source, "would read") if dry_run else reread_one(f, hub_reader)
        report.outcomes.append(outcome)
        if outcome.status == "stored":
            stored.append(f.pk)
        if progress:
            progress(outcome)
    for start in range(0, len(stored), BATCH):  # bounded IN lists, whatever the limit
        report.decisions.update(decide_again(stored[start : start + BATCH]))
    if stored:
        bump_generation()  # cached table pages show the old "adaptable" labels
    return report
