"""Adaptable near-miss pairs: an incompatible pair whose shown draft ``adapt_draft`` could give the target's
special tokens says so on its row, its page, in the API and in ``find_drafts``.

The rules are ``inspector.adapt.plan``'s, run on the two files' stored inspections (``Side.from_info``: the stored
ModelInfo with its token texts and types), never restated here. A decision is stored per (target file, draft file)
as an ``AdaptCheck`` row and read back in one query per page (see that model for why per file pair, not per
ClassCheck). A decision reads both files' token tables and types (megabytes each, and a page of near-misses from
many families meets more tables than the process caches), so the table, the API's list and the CSV read stored
decisions only, and a page of incompatible rows costs what any other does. They are made once per job that
registers files (an import, a crawl step, a local file, a draft search: ``registration.finish``), for the near-miss
pairs of the registered files' base models that lack one (``decide_pending``): the quants of one repository share
their tables, so a job reads them once, not once per file. A single pair (its page, the API's pair, a Hub job's
preview) still decides a missing or stale one on read. Reading the stored decisions alone is
registry.adapt_stored's (the table's read side imports that, not this module).

Only pairs whose first failing rule is bos, eos or token_text can be adaptable: plan refuses every other one
(architecture, vocab_type, vocab_size, a sidecar's method rules) before it looks at a token, so those pairs are
neither read nor stored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from inspector.adapt import NotAdaptable, Side, plan
from inspector.info import TYPES_KEY, ModelInfo
from registry.adapt_stored import (
    CANDIDATE_RULES,
    FRESH,
    VERSION,
    FilePair,
    PairLike,
    candidates,
    stored_decisions,
)
from registry.bulk_sql import id_in
from registry.catalog.pairing import as_target
from registry.catalog.stored import load_info, types_for
from registry.jsonsafe import json_safe
from registry.models import AdaptCheck, GGUFFile, Pair


def types_missing(f: GGUFFile) -> bool:
    """The file has token types, but they were not stored (registered before the registry stored them)."""
    return f.token_types_id is None and TYPES_KEY in ((f.info or {}).get("metadata") or {})


def stored_info(f: GGUFFile) -> ModelInfo:
    """The file's stored inspection with its token texts and types, as ``plan`` reads a header."""
    info = load_info(f)
    info.token_types = types_for(f)
    return info


def decide(target: GGUFFile, draft: GGUFFile) -> AdaptCheck:
    """``plan`` on the two stored files (unsaved). A refusal for a token's type where either file's types were not
    stored is "unknown": the type may be CONTROL in the header, and only reading it again can tell."""
    row = AdaptCheck(target=target, draft=draft, version=VERSION, decided_at=timezone.now())
    try:
        the_plan = plan(Side.from_info(stored_info(target)), Side.from_info(stored_info(draft)))
    except NotAdaptable as exc:
        missing = [f.filename for f in (target, draft) if types_missing(f)]
        if exc.rule == "token_text" and missing:
            row.state, row.rule = AdaptCheck.UNKNOWN, "token_types"
            row.detail = (
                f"Cannot tell: the token types of {' and '.join(missing)} were not stored when registered, and "
                "whether a differing token may be adapted depends on its type. manage.py reread_headers reads them."
            )
        else:
            row.state, row.rule, row.detail = AdaptCheck.REFUSED, exc.rule, exc.detail
        return row
    row.state, row.plan = AdaptCheck.ADAPTABLE, json_safe(the_plan.to_dict())
    return row


def decisions(wanted: Collection[FilePair], decide: bool = True) -> dict[FilePair, AdaptCheck]:
    """The decision for each (target file, draft file): stored rows in one query; missing ones, and those older than
    either file's inspection or made under other rules, decided now and stored (``decide`` False: left out)."""
    wanted = set(wanted)
    out = stored_decisions(wanted)
    missing = wanted - out.keys()
    if missing and decide:
        out.update(_decide_and_store(missing))
    return out


def decide_pending(file_ids: Iterable[int]) -> int:
    """Decide now every near-miss pair of these files' base models whose two shown files have no fresh decision
    (the pairs their registrations made, or whose files they moved); returns how many were decided. Two indexed
    reads where there are none, the common case."""
    files = GGUFFile.objects.filter(id_in(GGUFFile, "id", set(file_ids)), model__base_id__isnull=False)
    ids = sorted(set(files.values_list("model__base_id", flat=True)))
    if not ids:
        return 0
    fresh = AdaptCheck.objects.filter(FRESH, target_id=OuterRef("target_id"), draft_id=OuterRef("draft_id"))
    pending = Pair.objects.filter(
        Q(target_base_id__in=ids) | Q(draft_base_id__in=ids), compatible=False, failed_rule__in=CANDIDATE_RULES
    ).filter(~Exists(fresh))
    wanted = set(pending.values_list("target_id", "draft_id"))
    return len(_decide_and_store(wanted)) if wanted else 0


def decide_again(file_ids: Collection[int]) -> Counter[str]:
    """Decide again, now, every stored decision touching these files and every near-miss pair row that shows one
    of them (their token types were just stored: registry.catalog.reread, import_kb); the new states counted.

    Now rather than on the next read: the caller reports what changed, and a page opened later finds rows already
    made. Pairs of other files that ask about these (find_drafts' target file) are decided on their next read, as
    the file's new ``inspected_at`` makes their rows stale."""
    ids = set(file_ids)
    if not ids:
        return Counter()
    touching = Q(target_id__in=ids) | Q(draft_id__in=ids)
    wanted: set[FilePair] = set(AdaptCheck.objects.filter(touching).values_list("target_id", "draft_id"))
    near_misses = Pair.objects.filter(touching, compatible=False, failed_rule__in=CANDIDATE_RULES)
    wanted |= set(near_misses.values_list("target_id", "draft_id"))
    return Counter(row.state for row in _decide_and_store(wanted).values())


def _decide_and_store(missing: set[FilePair]) -> dict[FilePair, AdaptCheck]:
    ids = {i for pair in missing for i in pair}
    read = GGUFFile.objects.filter(pk__in=ids).select_related("token_table").defer("token_table__blob")
    files = {f.pk: f for f in read}
    out = {}
    for t, d in sorted(missing):
        if t in files and d in files:  # (not deleted meanwhile)
            out[(t, d)] = decide(files[t], files[d])
    # One statement for them all (a job decides hundreds; one update_or_create each cost a third of the time). Two
    # callers deciding the same pair at once write the same answer: the later one's stands. A file deleted between
    # the read and the write fails the batch's foreign key: it is written again without that file's rows (caught here
    # where this block is the outermost transaction; Django's foreign keys are checked when it commits).
    for _ in range(2):
        try:
            with transaction.atomic():
                AdaptCheck.objects.bulk_create(
                    list(out.values()),
                    batch_size=500,
                    update_conflicts=True,
                    unique_fields=["target", "draft"],
                    update_fields=["state", "rule", "detail", "plan", "version", "decided_at"],
                )
            break
        except IntegrityError:
            left = set(GGUFFile.objects.filter(pk__in=ids).values_list("pk", flat=True))
            out = {k: v for k, v in out.items() if k[0] in left and k[1] in left}
    return out


def for_pairs(pairs: Iterable[PairLike], decide: bool = True) -> dict[int, AdaptCheck]:
    """The decisions for the pairs among these that could be adaptable (on the two files each shows), by pair id;
    ``decide`` False: the stored ones only (a page of many rows: see the module's docstring)."""
    cands = candidates(pairs)
    found = decisions(set(cands.values()), decide)
    return {pk: found[fp] for pk, fp in cands.items() if fp in found}


def adaptable_drafts(target: GGUFFile, limit: int = 50, decide: bool = True) -> list[tuple[Pair, AdaptCheck]]:
    """Incompatible listed drafts of ``target``'s base model that can be adapted to ``target`` itself (the file
    asked about, not the quant the pair shows), smallest first. ``decide=False``: from stored decisions only (a
    page; the job that registered the files decided them)."""
    pairs = list(
        Pair.objects.filter(as_target(target), compatible=False, failed_rule__in=CANDIDATE_RULES)
        .select_related("draft__model")
        .defer("draft__info")
        .order_by("draft__parameter_count", "pk")[:limit]
    )
    found = decisions({(target.pk, p.draft_id) for p in pairs}, decide=decide)
    out = []
    for p in pairs:
        row = found.get((target.pk, p.draft_id))
        if row is not None and row.state == AdaptCheck.ADAPTABLE:
            out.append((p, row))
    return out
