"""Settling the pairs of a base model that gained a tokenizer class, from what each pair already holds.

When a file registered for the first time brings its base model B a class ``c`` B did not have, every pair of B gains
one combination per class of its partner X: (x, c) for each x of X (target and draft as the pair has them). Nothing
else changes: B's other classes and X's classes are what they were, and every pair of B was settled over them
(``combinations.settle``). So, without reading every combination of every pair again:

- The verdict: "all" stays unless a new combination fails ("partial"), "none" stays unless one passes ("partial"),
  "partial" stays.
- The combination shown: the pair showed the least of its combinations by (target class's standing, draft class's
  standing, incompatible, …) (``combinations.choose``). A new class ``c`` that stands lower (publisher, owners)
  than the class of B the pair shows, or as high but failing where the shown combination passes, loses every new
  combination to the shown one, so only the verdict can change (``_may_take_the_row``); otherwise the pair is
  settled the whole way (``settle_pairs``).

A popular small draft is in thousands of pairs: this reads them, and their partners' classes, as plain rows, decides
each new combination once per distinct partner class (most partners share a handful), and writes the verdicts that
changed with one UPDATE per distinct value (``save_settled``), so a registration's statements do not grow with the
pairs it settles. Rows still show the truth when the page is read: this runs in the registration's own transaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from django.db.models import Q, QuerySet

from registry.catalog.combinations import (
    ClassVerdicts,
    Combination,
    Settled,
    Standing,
    chunks,
    combine,
    settle_pairs,
    special_method,
    standings,
)
from registry.models import BaseClass, BaseModel, Pair


class PairRow(NamedTuple):
    """What settling reads of a pair, as a plain row: thousands of these cost what a few hundred objects would."""

    pk: int
    target_id: int
    draft_id: int
    target_base_id: int | None
    draft_base_id: int | None
    compatible: bool
    verdict: str
    files_pinned: bool
    target_class: int | None  # the tokenizer class of the file it shows, each side
    draft_class: int | None


def pair_rows(pairs: QuerySet[Pair]) -> list[PairRow]:
    """These pairs as plain rows (one query, joined to their two files for the classes they show)."""
    return [
        PairRow(*r)
        for r in pairs.values_list(
            "pk",
            "target_id",
            "draft_id",
            "target_base_id",
            "draft_base_id",
            "compatible",
            "verdict",
            "files_pinned",
            "target__tokenizer_class_id",
            "draft__tokenizer_class_id",
        )
    ]


# What registration and settling read of a Pair as an object (the rest, large or unused, stays deferred).
PAIR_READ = (
    "pk",
    "target_id",
    "draft_id",
    "target_base_id",
    "draft_base_id",
    "compatible",
    "llama_cpp_compatible",
    "failed_rule",
    "rules_from",
    "verdict",
    "files_pinned",
    "target_name",
    "draft_name",
    "search_text",
    "size_ratio",
    "target__tokenizer_class_id",
    "draft__tokenizer_class_id",
    # what a check on the pair's own files reads of each (pairing.Verdicts), not one query per file
    "target__arch_kind",
    "draft__arch_kind",
    "target__speculative_type",
    "draft__speculative_type",
)


def pair_objects(pks: Iterable[int]) -> dict[int, Pair]:
    """These pairs as objects with their two files, for the few that registration checks again or moves."""
    out = {}
    for ids in chunks(sorted(set(pks))):
        out.update(
            {p.pk: p for p in Pair.objects.filter(pk__in=ids).select_related("target", "draft").only(*PAIR_READ)}
        )
    return out


class PartnerClass(NamedTuple):
    """One class of a partner base model, as a plain row: what a combination with it depends on, and its file."""

    pk: int
    base_id: int
    class_id: int
    file_id: int
    # What the combination's verdict reads: the class (its vocabulary rules), the file's kind (the architecture
    # rule), and the file itself only for a sidecar or MTP draft (judged per file by its method's rules).
    signature: tuple[int, str, int]


def partner_classes(base_id: int) -> dict[int, list[PartnerClass]]:
    """The classes of every base model in a pair with ``base_id``, oldest first, as plain rows: one query per
    direction of the pairs, each a semi-join on them (no list of thousands of ids, no model instances)."""
    out: dict[int, list[PartnerClass]] = defaultdict(list)
    seen: set[int] = set()
    for partners in (
        Pair.objects.filter(draft_base_id=base_id).values_list("target_base_id", flat=True),
        Pair.objects.filter(target_base_id=base_id).values_list("draft_base_id", flat=True),
    ):
        rows = (
            BaseClass.objects.filter(base_id__in=partners)
            .exclude(base_id=base_id)
            .order_by("pk")
            .values_list("pk", "base_id", "tokenizer_class_id", "file_id", "file__arch_kind", "file__speculative_type")
        )
        for pk, partner, class_id, file_id, kind, spec in rows:
            if pk not in seen:  # a partner in a pair each way
                seen.add(pk)
                signature = (class_id, kind or "", file_id if special_method(spec) else 0)
                out[partner].append(PartnerClass(pk, partner, class_id, file_id, signature))
    for rows_of_one in out.values():
        rows_of_one.sort(key=lambda r: r.pk)
    return out


def class_rows(base_id: int, pks: Iterable[int]) -> list[BaseClass]:
    """``base_id``'s class rows and these others, oldest first, as ``sides`` reads them (with the tokenizer class,
    and the file's method from its stored inspection): one query."""
    rows = (
        BaseClass.objects.filter(Q(base_id=base_id) | Q(pk__in=sorted(set(pks))))
        .select_related("tokenizer_class", "file__token_table", "file__model__family")
        .defer("file__info", "file__token_table__blob")
        .order_by("pk")
    )
    return list(rows)


@dataclass
class _Gain:
    """What deciding the new combinations of ``base``'s pairs reads once: the partners' classes (one row standing
    for every class that shares its signature), ``base``'s new class row and its old ones, their standings."""

    base: BaseModel
    partners: dict[int, list[PartnerClass]]
    reps: dict[tuple[int, str, int], BaseClass]
    new: BaseClass
    old: list[BaseClass]
    verdicts: ClassVerdicts
    standing: dict[tuple[int, int], Standing]
    own_file: dict[int, int] = field(default_factory=dict)  # B's old classes -> the file each stands for
    memo: dict[tuple[bool, tuple[int, str, int], int], Combination] = field(default_factory=dict)

    def rank(self, bc_class: int) -> tuple[int, int, int]:
        return self.standing[(self.base.pk, bc_class)].key()

    def meet(self, base_is_target: bool, x: PartnerClass, b: BaseClass) -> Combination:
        """The combination of B's class ``b`` with partner class ``x``, in the pair's direction (once per kind)."""
        key = (base_is_target, x.signature, b.tokenizer_class_id)
        if key not in self.memo:
            rep = self.reps[x.signature]
            self.memo[key] = combine(b, rep, self.verdicts) if base_is_target else combine(rep, b, self.verdicts)
        return self.memo[key]


def _gain(base: BaseModel, class_id: int, record: bool) -> _Gain | None:
    """The context for ``base``'s new class ``class_id``; None where it is the model's first class (no settled
    combinations to start from)."""
    partners = partner_classes(base.pk)
    # One partner class row per signature stands for all that share it: most partners share a handful of classes.
    first: dict[tuple[int, str, int], int] = {}
    for rows in partners.values():
        for r in rows:
            first.setdefault(r.signature, r.pk)
    loaded = class_rows(base.pk, first.values())
    mine = [bc for bc in loaded if bc.base_id == base.pk]
    by_pk = {bc.pk: bc for bc in loaded}
    new = next((bc for bc in mine if bc.tokenizer_class_id == class_id), None)
    old = [bc for bc in mine if bc is not new]
    if new is None or not old:
        return None
    # Every combination below is decided from these classes' stored checks, or checked once and stored.
    reps = {sig: by_pk[pk] for sig, pk in first.items() if pk in by_pk}
    verdicts = ClassVerdicts({bc.tokenizer_class_id for bc in mine} | {sig[0] for sig in reps}, record)
    own_file = {bc.tokenizer_class_id: bc.file_id for bc in old}
    return _Gain(base, partners, reps, new, old, verdicts, standings({base.pk: base}, {base.pk: mine}), own_file)


# What one pair needs: settling the whole way, or a new verdict on the files it shows; None where nothing changes.
_Outcome = Literal["whole"] | str | None


def settle_gained_class(base: BaseModel, class_id: int, pairs: list[PairRow], record: bool = True) -> Settled:
    """Settle ``pairs`` (pairs of ``base``, each settled before ``base`` gained class ``class_id``) over their new
    combinations; returns what changed, unsaved: verdicts alone by pair id, pairs whose files move as objects."""
    g = _gain(base, class_id, record)
    if g is None:  # the model's first class: no settled combinations to start from
        return settle_pairs(list(pair_objects(p.pk for p in pairs).values()), record)
    out = Settled()
    whole: list[int] = []  # pairs settled the whole way
    for p in pairs:
        outcome = _decide(g, p)
        if outcome == "whole":
            whole.append(p.pk)
        elif outcome is not None:
            out.verdicts[p.pk] = outcome  # the files it shows, and their combination, stay
    if whole:
        out.add(settle_pairs(list(pair_objects(whole).values()), record))
    return out


def _decide(g: _Gain, p: PairRow) -> _Outcome:
    """What pair ``p`` needs now that its base model has the new class (see ``_Outcome``)."""
    if p.target_base_id is None or p.draft_base_id is None or p.target_base_id == p.draft_base_id:
        return "whole"
    b_is_target = p.target_base_id == g.base.pk
    xs = g.partners.get(p.draft_base_id if b_is_target else p.target_base_id, [])
    if not xs:
        return None  # the partner has no classes (files without a tokenizer): the pair keeps what it has
    if any(x.signature not in g.reps for x in xs):
        return "whole"  # a class row went between the two reads
    own_file = g.own_file
    o_b, o_x = (p.target_class, p.draft_class) if b_is_target else (p.draft_class, p.target_class)
    b_file, x_file = (p.target_id, p.draft_id) if b_is_target else (p.draft_id, p.target_id)
    shown_x = next((x for x in xs if x.class_id == o_x), None)
    if (
        shown_x is None
        or o_b is None
        or o_b not in own_file
        or (not p.files_pinned and (own_file[o_b], shown_x.file_id) != (b_file, x_file))
    ):
        return "whole"  # not what a settled pair shows (files moved out, a class gone): from the start
    added = [(x, g.meet(b_is_target, x, g.new)) for x in xs]
    verdict = p.verdict
    if verdict == Pair.VERDICT_ALL and not all(c.compatible for _, c in added):
        verdict = Pair.VERDICT_PARTIAL
    elif verdict == Pair.VERDICT_NONE and any(c.compatible for _, c in added):
        verdict = Pair.VERDICT_PARTIAL
    if not p.files_pinned and _may_take_the_row(g.rank(g.new.tokenizer_class_id), g.rank(o_b), p.compatible, added):
        return "whole"
    return verdict if verdict != p.verdict else None


def _may_take_the_row(
    new: tuple[int, int, int],
    shown: tuple[int, int, int],
    compatible: bool,
    added: list[tuple[PartnerClass, Combination]],
) -> bool:
    """Whether a combination of the new class might now be the one the pair shows, where ``new`` and ``shown`` are
    the standings of the new class and of the pair's own class of that model. ``combinations.choose`` orders by the
    target class's standing, then the draft class's, then compatibility; the partner class the pair shows already
    stands highest among the partner's (compatibility only broke ties). So a new class that stands lower loses every
    combination, and one that stands as high loses too where the shown combination passes and none of the new ones
    does. Otherwise (it stands higher, or compatibility or the exact class may decide) the pair is settled whole."""
    if new[:2] > shown[:2]:
        return False
    return not (new[:2] == shown[:2] and compatible and not any(c.compatible for _, c in added))
