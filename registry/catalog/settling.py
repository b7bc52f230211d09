"""Settling pairs: each pair's verdict (all, partial, none), the combination it shows and the two files it shows.

One entry, ``settle``, for every caller: registration (its new pairs before they are written, the pairs it checked
again, and every other pair of a base model whose classes grew), ``resettle`` (files moved, deleted, regrouped),
``recheck_pairs``, reorientation and the admin. A pair is settled over every combination of its two sides' classes
(``registry.catalog.combinations``: the verdict per pair of tokenizer classes, the shown combination by standing
first, ``choose``).

A caller that knows more says so (``known``). ``Gained(base, class_id)`` tells that every pair given was settled
before ``base`` gained the tokenizer class ``class_id`` (a file registered for the first time brought it), and nothing
else changed. Every such pair gains one combination per class of its partner, (x, c) for each x (target and draft as
the pair has them), and the rest of its combinations are what they were. So, without reading every combination of
every pair:

- The verdict: "all" stays unless a new combination fails ("partial"), "none" stays unless one passes ("partial"),
  "partial" stays.
- The combination shown: a new class that stands lower (publisher, owners) than the class of ``base`` the pair shows,
  or as high but failing where the shown combination passes, loses every new combination to the shown one, so only
  the verdict can change (``_may_take_the_row``); any other pair is settled over every combination, as without
  ``Gained``.

A popular small draft is in thousands of pairs: with ``Gained`` they are read as plain rows (``PairRow``), with their
partners' classes, each new combination decided once per distinct partner class (most partners share a handful),
and ``Settled.save`` writes the verdicts that changed with one UPDATE per distinct value (registry.bulk_sql), so a
registration's statements do not grow with the pairs it settles.

``Rose(base, class_id)`` tells that a class ``base`` had already gained an owner (a file of it from a repository
owner who had uploaded none): it stands higher (``combinations.standings``), every combination is what it was, and
only pairs showing another class of ``base`` are settled, over every combination.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from django.db.models import Q, QuerySet

from registry.bulk_sql import bulk_set, chunks, id_in, update_by_value
from registry.catalog.columns import table_columns
from registry.catalog.combinations import (
    ClassVerdicts,
    Combination,
    Standing,
    combine,
    pair_combinations,
    special_method,
    standings,
)
from registry.catalog.sizes import pair_ratio
from registry.models import BaseClass, BaseModel, GGUFFile, Pair, PairCheckResult

# The columns settling writes on a pair whose files moved.
SETTLED_FIELDS = [
    "verdict",
    "compatible",
    "llama_cpp_compatible",
    "failed_rule",
    "rules_from",
    "target",
    "draft",
    "target_name",
    "draft_name",
    "search_text",
    "size_ratio",
]

# The columns a settled pair whose files stayed can change: its chosen combination's (and the verdict).
VERDICT_COLUMNS = ("verdict", "compatible", "llama_cpp_compatible", "failed_rule", "rules_from")


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


def _row_of(p: Pair) -> PairRow:
    return PairRow(
        p.pk,
        p.target_id,
        p.draft_id,
        p.target_base_id,
        p.draft_base_id,
        p.compatible,
        p.verdict,
        p.files_pinned,
        p.target.tokenizer_class_id,
        p.draft.tokenizer_class_id,
    )


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


@dataclass
class Settled:
    """Pairs whose settled columns changed (unsaved), those of them whose files moved, and pairs (by id, not read as
    objects) whose verdict alone changed. Iterating gives the changed pairs read as objects."""

    pairs: list[Pair] = field(default_factory=list)
    moved: set[int] = field(default_factory=set)
    verdicts: dict[int, str] = field(default_factory=dict)

    def add(self, other: Settled) -> None:
        self.pairs += other.pairs
        self.moved |= other.moved
        self.verdicts.update(other.verdicts)

    def __len__(self) -> int:
        return len(self.pairs) + len(self.verdicts)

    def __iter__(self) -> Iterator[Pair]:
        return iter(self.pairs)

    def save(self) -> None:
        """Write what changed with a number of statements that does not grow with the pairs whose files stayed.

        A class a popular draft gains can change the verdict of thousands of its pairs at once ("all" → "partial"),
        each to the same values: one UPDATE per distinct set of verdict columns writes them all (``bulk_update``
        would build a CASE per row and column). Pairs whose files moved get every settled column, per row, and lose
        their stored full check (it was of the files they no longer show)."""
        moved = [p for p in self.pairs if p.pk in self.moved]
        if moved:
            bulk_set(Pair, moved, SETTLED_FIELDS)  # one UPDATE … FROM VALUES, not a CASE per row
            for ids in chunks([p.pk for p in moved]):
                PairCheckResult.objects.filter(id_in(PairCheckResult, "pair", ids)).delete()
        stayed = {p.pk: tuple(getattr(p, k) for k in VERDICT_COLUMNS) for p in self.pairs if p.pk not in self.moved}
        update_by_value(Pair, VERDICT_COLUMNS, stayed)
        update_by_value(Pair, ("verdict",), {pk: (verdict,) for pk, verdict in self.verdicts.items()})


@dataclass(frozen=True)
class Gained:
    """What a caller knows of the pairs it settles: each was settled before ``base`` gained the tokenizer class
    ``class_id``, and nothing else about them changed."""

    base: BaseModel
    class_id: int


@dataclass(frozen=True)
class Rose:
    """What a caller knows of the pairs it settles: each was settled before the class ``class_id`` of ``base`` rose
    in standing (a file of it came from a repository owner who had uploaded none), and nothing else changed. Their
    combinations are the same, so their verdicts are; a pair showing that class already shows the combination
    ``combinations.choose`` puts first (it stands only higher), and only the others may move."""

    base: BaseModel
    class_id: int

    def may_move(self, p: PairRow) -> bool:
        shown = {p.target_class if p.target_base_id == self.base.pk else None}
        shown.add(p.draft_class if p.draft_base_id == self.base.pk else None)
        return self.class_id not in shown


def settle(
    pairs: Sequence[Pair] | Sequence[PairRow], *, known: Gained | Rose | None = None, record: bool = True
) -> Settled:
    """Set each pair's verdict and the two files it shows from its combinations; return what changed (unsaved:
    ``Settled.save`` writes it). A pair whose base models have no classes (files without a tokenizer) keeps what it
    has. ``known``: what the caller knows of the pairs (see the module's docstring); pairs given as plain rows are
    read as objects only where they are settled over every combination. ``record`` False: class checks decided on
    the way are not written (a caller's open transaction would hold their unique keys)."""
    objects = [p for p in pairs if isinstance(p, Pair)]  # (new pairs, not yet written, have no id)
    unread = [p.pk for p in pairs if isinstance(p, PairRow)]
    g = _gain(known.base, known.class_id, record) if isinstance(known, Gained) else None
    if known is None or (isinstance(known, Gained) and g is None):
        # Nothing known, or the model's first class (no settled combinations to start from): every pair whole.
        return _settle_whole([*objects, *pair_objects(unread).values()], record)
    given = {p.pk: p for p in objects}
    out = Settled()
    whole: list[int] = []
    for r in (p if isinstance(p, PairRow) else _row_of(p) for p in pairs):
        if g is not None:
            outcome = _decide(g, r)
        else:  # (what rose)
            outcome = "whole" if isinstance(known, Rose) and known.may_move(r) else None
        if outcome == "whole":
            whole.append(r.pk)
        elif outcome is not None:
            out.verdicts[r.pk] = outcome  # the files it shows, and their combination, stay
    loaded = pair_objects(pk for pk in whole if pk not in given)
    out.add(_settle_whole([given.get(pk) or loaded[pk] for pk in sorted(whole) if pk in given or pk in loaded], record))
    return out


def resettle(base_ids: Iterable[int | None]) -> int:
    """Settle every pair of these base models again, and write it (after their files or classes changed outside
    registration: files moved to another base model, deleted, pinned); returns how many changed."""
    ids = {b for b in base_ids if b is not None}
    pairs = list(
        Pair.objects.filter(Q(target_base_id__in=ids) | Q(draft_base_id__in=ids)).select_related("target", "draft")
    )
    settled = settle(pairs)
    settled.save()
    return len(settled)


def _settle_whole(pairs: list[Pair], record: bool) -> Settled:
    """Settle ``pairs`` over every combination of their classes, telling which pairs' files moved."""
    out = Settled()
    if not pairs:
        return out
    for pc in pair_combinations(pairs, record):
        p, c = pc.pair, pc.chosen
        if c is None:
            continue
        target, draft = c.target.file, c.draft.file
        if p.files_pinned:  # staff chose the files: keep them, with their own combination's verdict
            c = next(
                (
                    x
                    for x in pc.combos
                    if (x.target.tokenizer_class_id, x.draft.tokenizer_class_id)
                    == (p.target.tokenizer_class_id, p.draft.tokenizer_class_id)
                ),
                c,
            )
            # (not written into the combination: its class rows are shared by every pair of the batch)
            target, draft = p.target, p.draft
        before = (p.target_id, p.draft_id)
        if apply_combination(p, pc.verdict, c, target, draft):
            out.pairs.append(p)
            if (p.target_id, p.draft_id) != before:
                out.moved.add(p.pk)
    return out


def apply_combination(p: Pair, verdict: str, c: Combination, target: GGUFFile, draft: GGUFFile) -> bool:
    """Give ``p`` the verdict ``verdict`` and combination ``c`` shown on these two files; whether anything changed.
    The names, search text and size ratio the table shows follow the files where they moved."""
    fields = {
        "verdict": verdict,
        "compatible": c.compatible,
        "llama_cpp_compatible": c.llama_cpp_compatible,
        "failed_rule": c.failed_rule,
        "rules_from": c.rules_from,
        "target_id": target.pk,
        "draft_id": draft.pk,
    }
    if all(getattr(p, k) == v for k, v in fields.items()):
        return False
    files_moved = (p.target_id, p.draft_id) != (target.pk, draft.pk)
    for k, v in fields.items():
        setattr(p, k, v)
    if files_moved:
        p.target, p.draft = target, draft
        for k, v in table_columns(target, draft).items():
            setattr(p, k, v)
        p.size_ratio = pair_ratio(target, draft)
    return True


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
    """``base_id``'s class rows and these others, oldest first, as ``combinations.sides`` reads them (with the
    tokenizer class, and the file's method from its stored inspection): one query."""
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
