"""Which pairs of base models get a row (a line in the table, a page): the rule that keeps storage linear in files.

Within one tokenizer family every base model can draft for every bigger one, so rows for all of them grow with the
square of the family's base models: the Hub's Qwen2.5 family alone holds thousands of fine-tunes. A pair is
*worth listing* when it is one of the ``SPECREG_LISTED_DRAFTS`` (16) smallest compatible drafts of its target
that have at most half the target's parameters (``SPECREG_LISTED_MIN_RATIO``: a draft near the target's size
cannot pay), or one of the
``SPECREG_LISTED_MISSES`` (4) smallest incompatible near-misses (they say why a likely draft fails). Sizes that
are not known cannot be judged and are listed within the cap. A smaller draft that comes later takes the place of
the biggest listed one (at one size the earliest registered keeps its place: ``rank``), which is dropped only when
nothing was attached to it. A pair that carries anything (a
measured, reported or predicted figure, a run, a note, a deployment, a verdict change) is always kept, and one a
person asks for (a check, a benchmark: ``pairing.pair_for``) is made. Every other compatible base model is still
answered, from the tokenizer classes, by ``unlisted_partners``: the model page lists them, and a click checks one.
So rows grow with base models times a constant, not with their square.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from django.conf import settings
from django.db.models import F, Q, QuerySet

from inspector.llama_rules import NO_SPECULATION_KINDS, speculates
from inspector.speculative import SIDECAR_ARCHS
from registry.bulk_sql import id_in
from registry.models import BaseClass, BaseModel, ClassCheck, GGUFFile, Pair, PairCheckResult

Rank = tuple[float, int]
NAMED_IDS = 2000  # up to this many pairs, with_evidence names them in its queries (within SQLite's variable limit)


def rank(base: BaseModel | None) -> Rank:
    """Smaller drafts first (an unknown size last), then the earliest registered.

    Not the key, at one size: fine-tunes of one model share its parameter count, so a new one whose key sorted first
    would take a place from a listed one in every target of its family (writing and dropping hundreds of pairs in one
    registration), and an uploader could push every listed draft of a family out with names chosen to sort first.
    So a later upload takes a place only by being smaller.

    (figures: docs/benchmarks.md, "Figures behind design choices")"""
    if base is None:
        return (math.inf, 0)
    return (float(base.parameter_count) if base.parameter_count > 0 else math.inf, base.pk)


def notably_smaller(target: BaseModel, draft: BaseModel) -> bool:
    """The draft has at most 1/SPECREG_LISTED_MIN_RATIO of the target's parameters (or a size is not known)."""
    t, d = target.parameter_count, draft.parameter_count
    return not (t > 0 and d > 0) or settings.SPECREG_LISTED_MIN_RATIO * d <= t


def with_evidence(pair_ids: Iterable[int]) -> set[int]:
    """The pairs among these that carry something besides their computed verdict (every table that points at a
    pair, found from the model's relations so that a new kind of evidence is kept without a change here).

    A few ids are named in each query (one array parameter on PostgreSQL: registry.bulk_sql). Many are not: a small
    draft joining a big family reads the listed pairs of thousands of targets, and naming tens of thousands of ids is
    slow even as one array, while evidence is rare beside pairs. So each table then gives the pairs it points at,
    and those among these are kept.

    (figures: docs/benchmarks.md, "Figures behind design choices")"""
    wanted = set(pair_ids)
    if not wanted:
        return set()
    named = len(wanted) <= NAMED_IDS
    kept: set[int] = set()
    figures = Pair.objects.exclude(best_kind="")
    kept |= wanted.intersection(_pks(figures.filter(id_in(Pair, "id", wanted)) if named else figures, "pk"))
    for rel in Pair._meta.related_objects:
        if rel.related_model is PairCheckResult or not (rel.one_to_many or rel.one_to_one):
            continue
        name = rel.field.name
        manager = rel.related_model._default_manager
        pointing = (
            manager.filter(id_in(rel.related_model, name, wanted))
            if named
            else manager.filter(**{f"{name}__isnull": False})
        )
        kept |= wanted.intersection(_pks(pointing, name))
    return kept


def _pks(qs: QuerySet, name: str) -> QuerySet:
    """The distinct values of ``name`` in ``qs`` (the pair ids a table points at)."""
    return qs.order_by().values_list(name, flat=True).distinct()


class Listing:
    """The listed pairs of some target base models, read once, deciding for each new pair whether it gets a row."""

    def __init__(self, target_ids: Iterable[int]) -> None:
        self.rows: dict[tuple[int, bool], list[tuple[Rank, int | None]]] = {}
        self.dropped: list[int] = []  # deleted together by drop(): one pass over the tables that point at pairs
        self._kept: set[int] | None = None  # the read pairs that carry something, read once when first needed
        read = (
            Pair.objects.filter(id_in(Pair, "target_base", set(target_ids)))
            .exclude(target_base=F("draft_base"))
            .values_list("pk", "target_base_id", "compatible", "draft_base__parameter_count", "draft_base_id")
        )
        for pk, target_id, compatible, params, draft_id in read:
            size = float(params) if params and params > 0 else math.inf
            self.rows.setdefault((target_id, compatible), []).append(((size, draft_id or 0), pk))

    def admit(self, target: BaseModel, draft: BaseModel, compatible: bool) -> bool:
        """Whether the new pair (target, draft) is worth a row; makes room by dropping a bigger listed draft that
        carries nothing when the target's places are taken."""
        if compatible and not notably_smaller(target, draft):
            return False
        cap = settings.SPECREG_LISTED_DRAFTS if compatible else settings.SPECREG_LISTED_MISSES
        rows = self.rows.setdefault((target.pk, compatible), [])
        mine = rank(draft)
        if len(rows) < cap:
            rows.append((mine, None))
            return True
        bigger = sorted(((r, pk) for r, pk in rows if r > mine and pk is not None), reverse=True)
        if not bigger:
            return False
        if self._kept is None:
            self._kept = with_evidence(pk for rows in self.rows.values() for _, pk in rows if pk is not None)
        for r, pk in bigger:
            if pk not in self._kept:
                rows.remove((r, pk))
                rows.append((mine, None))
                self.dropped.append(pk)
                return True
        return False

    def drop(self) -> None:
        """Delete the rows that gave their place (call before writing the new ones)."""
        if self.dropped:
            Pair.objects.filter(pk__in=self.dropped).delete()


def compatible_classes(class_id: int) -> set[int]:
    """Tokenizer classes whose vocabulary passes llama.cpp's rules with this one (itself included)."""
    rows = ClassCheck.objects.filter(Q(a_id=class_id) | Q(b_id=class_id), compatible=True).values_list("a_id", "b_id")
    return {class_id} | {a if b == class_id else b for a, b in rows}


def unlisted_partners(f: GGUFFile, side: str, limit: int = 50) -> list[BaseClass]:
    """Compatible base models without a listed pair with ``f``'s: drafts (``side`` "draft": smaller, smallest first)
    or targets ("target": bigger, biggest first), one row of (base model, tokenizer class, a file) each, from
    the class index in one query whatever the family's size. Sidecars and MTP heads are checked per file: not here."""
    base = f.model.base
    if base is None or f.tokenizer_class_id is None or not speculates(f.arch_kind):
        return []
    mine, other = ("target_base", "draft_base_id") if side == "draft" else ("draft_base", "target_base_id")
    listed = Pair.objects.filter(**{mine: base}).values_list(other, flat=True)
    if side == "draft":
        size = Q(base__parameter_count__lt=base.parameter_count) if base.parameter_count else Q()
        order = ("base__parameter_count", "base_id")
    else:
        size = Q(base__parameter_count__gt=base.parameter_count) if base.parameter_count else Q()
        order = ("-base__parameter_count", "base_id")
    rows = (
        BaseClass.objects.filter(size, tokenizer_class_id__in=compatible_classes(f.tokenizer_class_id))
        .exclude(file__arch_kind__in=NO_SPECULATION_KINDS)
        .exclude(file__architecture__in=SIDECAR_ARCHS)
        .exclude(base=base)
        .exclude(base_id__in=listed)
        .select_related("base", "file__model")
        .defer("file__info")
        .order_by(*order, "pk")[: limit * 2]
    )
    out: dict[int, BaseClass] = {}
    for row in rows:
        out.setdefault(row.base_id, row)
    return list(out.values())[:limit]
