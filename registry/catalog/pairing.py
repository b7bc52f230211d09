"""Pairing: which base models could pair, which one is the target, and the Pair row's fields.

A pair joins two base models (registry.catalog.bases), checked with llama.cpp's rules on one file of each;
registration, ``pair_for`` (any two files a user names) and the check of a browser-sent header all decide
the same way here.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from inspector.compat import check_pair
from inspector.info import ModelInfo, size_label_count
from inspector.llama_rules import speculates
from inspector.tokens import MAX_SIZE_DIFFERENCE, candidate_keys
from registry.bulk_sql import bulk_set, chunks
from registry.catalog.bases import own_original
from registry.catalog.classes import candidate_classes
from registry.catalog.columns import table_columns
from registry.catalog.combinations import owner, pair_combinations, special_method, vocabulary_check
from registry.catalog.listing import Listing, rank
from registry.catalog.settling import Gained, PairRow, Rose, Settled, pair_objects, pair_rows, settle
from registry.catalog.sizes import pair_ratio
from registry.catalog.stored import load_info
from registry.jsonsafe import json_safe
from registry.models import BaseClass, BaseModel, ClassCheck, GGUFFile, Pair, PairCheckResult


def candidate_files(vocab_type: str, n_vocab: int, vocab_key: str) -> QuerySet[GGUFFile]:
    """Registered files whose vocabulary could match: the index key(s) and a ±128 size window."""
    if not vocab_key:
        return GGUFFile.objects.none()
    qs = GGUFFile.objects.filter(
        vocab_type=vocab_type, n_vocab__gte=n_vocab - MAX_SIZE_DIFFERENCE, n_vocab__lte=n_vocab + MAX_SIZE_DIFFERENCE
    )
    keys = candidate_keys(vocab_key)
    return qs if keys is None else qs.filter(vocab_key__in=keys)


def candidates(f: GGUFFile) -> QuerySet[GGUFFile]:
    """Registered files that could pair with ``f``: the files of the classes the class index finds."""
    if f.tokenizer_class is None:
        return GGUFFile.objects.none()
    return GGUFFile.objects.filter(tokenizer_class__in=candidate_classes(f.tokenizer_class)).exclude(pk=f.pk)


def size_key(parameter_count: int, size: int | None, source: str) -> tuple[int, int, str]:
    # The bigger model is the target; ties (the same model twice) fall to file size, then name,
    # so the choice is stable whichever file was registered first.
    return (parameter_count, size or 0, source)


def info_is_target(info: ModelInfo, other: GGUFFile) -> bool:
    """The same rule for a file that is not registered (a header sent by a browser): its tensors' count, else its size
    label (a header-only upload lists no tensors), against the registered file's model size (registry.catalog.sizes)."""
    mine = info.parameter_count or size_label_count(info.size_label)
    theirs = other.parameter_count
    base = other.model.base if other.model.base_id else None
    if not theirs and base is not None:
        theirs = base.parameter_count
    return size_key(mine, info.file_size, info.source) >= size_key(theirs, other.size, other.source)


def as_target(f: GGUFFile) -> Q:
    """Pairs with ``f``'s base model as the target (with ``f`` itself where it has none)."""
    return Q(target_base_id=f.model.base_id) if f.model.base_id else Q(target=f)


def as_draft(f: GGUFFile) -> Q:
    """Pairs with ``f``'s base model as the draft."""
    return Q(draft_base_id=f.model.base_id) if f.model.base_id else Q(draft=f)


def base_is_target(a: BaseModel, b: BaseModel) -> bool:
    """Whether base model ``a`` is the target when it pairs with ``b``: the bigger; at the same size (sizes nobody
    stated, or one model under two names) the key decides, so the choice does not depend on what came first."""
    return (a.parameter_count, a.key) >= (b.parameter_count, b.key)


VERDICT_FIELDS = ["compatible", "verdict", "llama_cpp_compatible", "failed_rule", "rules_from", "checked_at"]


class HasVerdict(Protocol):
    compatible: bool
    llama_cpp_compatible: bool
    failed_rule: str | None
    rules_from: str


def verdict_fields(result: HasVerdict, now: datetime) -> dict[str, Any]:
    """The Pair row's verdict columns for a check result (registration and recheck_pairs both write these)."""
    return {
        "compatible": result.compatible,
        # refined over every class combination by settling.settle; one combination known so far
        "verdict": Pair.VERDICT_ALL if result.compatible else Pair.VERDICT_NONE,
        "llama_cpp_compatible": result.llama_cpp_compatible,
        "failed_rule": result.failed_rule or "",
        "rules_from": result.rules_from,
        "checked_at": now,
    }


def pair_fields(result: HasVerdict, target: GGUFFile, draft: GGUFFile, now: datetime) -> dict[str, Any]:
    """The Pair row's columns for a check result (verdict, and what the table sorts and filters by)."""
    return {
        **verdict_fields(result, now),
        "size_ratio": pair_ratio(target, draft),
        **table_columns(target, draft),  # names and search text the pairs table sorts and searches by
    }


def full_check(pair: Pair) -> dict[str, Any]:
    """llama.cpp's whole check of the pair's two files (each rule explained), from their stored inspections."""
    return json_safe(check_pair(load_info(pair.target), load_info(pair.draft)).to_dict())


@dataclass
class Verdict:
    compatible: bool
    llama_cpp_compatible: bool
    failed_rule: str | None
    rules_from: str


class PartnerFile(NamedTuple):
    """One file of a partner base model, as a plain row: what its verdict against ``f`` reads (its class, its kind
    for the architecture rule, its method for sidecar and MTP drafts). Loaded as an object only where a pair gets a
    row or a check must read its tokens (``_load``)."""

    pk: int
    tokenizer_class_id: int | None
    arch_kind: str
    speculative_type: str


def partner_files(
    f: GGUFFile, base: BaseModel, paired: Collection[int] = ()
) -> dict[int, tuple[BaseModel, list[PartnerFile]]]:
    """Other base models with files that could pair with ``f``: one file per tokenizer class of each, from the
    class index and the (base model, class) table, so the read grows with base models, not with files.

    Plain rows, one query: a new base model in a big family meets hundreds of partners, and reading each class as
    six model instances (class row, base model, file, model, family, token table) would be a large share of the
    registration's time. The partner base models are bare instances holding what ranking reads (pk,
    parameter count, key). (figures: docs/benchmarks.md, "Figures behind design choices")

    ``paired``: base models to leave out (already in a compatible pair with ``base``: nothing ``f`` brings changes
    the files such a pair shows, and a popular small draft is in thousands)."""
    if f.tokenizer_class is None:
        return {}
    out: dict[int, tuple[BaseModel, list[PartnerFile]]] = {}
    rows = (
        BaseClass.objects.filter(tokenizer_class__in=candidate_classes(f.tokenizer_class))
        .exclude(base=base)
        .order_by("base_id", "pk")
        .values_list(
            "base_id",
            "base__parameter_count",
            "base__key",
            "file_id",
            "tokenizer_class_id",
            "file__arch_kind",
            "file__speculative_type",
        )
    )
    for base_id, params, key, file_id, class_id, kind, spec in rows:
        if base_id in paired:
            continue
        if base_id not in out:
            partner = BaseModel(pk=base_id, parameter_count=params, key=key)
            if own_original(base, partner):
                paired = {*paired, base_id}  # an adapted draft and its own original are never a pair
                continue
            out[base_id] = (partner, [])
        out[base_id][1].append(PartnerFile(file_id, class_id, kind or "", spec))
    return out


def _load(pks: Collection[int], whole: bool = False) -> dict[int, GGUFFile]:
    """These files as objects with what a Pair's columns copy (catalog.columns); ``whole``: with the stored
    inspection too, for a check that reads it (load_info)."""
    out: dict[int, GGUFFile] = {}
    for ids in chunks(sorted(set(pks))):
        files = GGUFFile.objects.filter(pk__in=ids).select_related("model__family", "token_table")
        files = files.defer("token_table__blob") if whole else files.defer("info", "token_table__blob")
        out.update({x.pk: x for x in files})
    return out


class Verdicts:
    """Verdicts for one file against others: llama.cpp's vocabulary rules once per pair of tokenizer classes
    (ClassCheck, read in one query and written the first time two classes meet), the architecture rule per file
    (attention-only models only, as inspector.compat checks it), the whole check only for sidecar and MTP drafts."""

    def __init__(self, f: GGUFFile, info: ModelInfo, record: bool = True) -> None:
        # ``record`` False: decided but not written. A caller holding its own transaction open (import_kb)
        # would hold the new ClassCheck row with it, and every registration meeting the same two classes
        # would wait on that row's unique key until it commits; its pairing after the commit records it.
        self.f, self.info, self.record = f, info, record
        c = f.tokenizer_class_id
        self.known = (
            {(row.a_id, row.b_id): row for row in ClassCheck.objects.filter(Q(a_id=c) | Q(b_id=c))}
            if c is not None
            else {}
        )

    def verdict(self, other: GGUFFile | PartnerFile, f_is_target: bool) -> Verdict:
        f, info = self.f, self.info
        spec = other.speculative_type
        draft_spec = info.speculative_type if not f_is_target else spec
        if special_method(draft_spec) or f.tokenizer_class_id is None or other.tokenizer_class_id is None:
            other_info = load_info(_as_file(other))
            r = check_pair(info, other_info) if f_is_target else check_pair(other_info, info)
            return Verdict(r.compatible, r.llama_cpp_compatible, r.failed_rule, r.rules_from)
        a, b = sorted((f.tokenizer_class_id, other.tokenizer_class_id))
        row = self.known.get((a, b))
        if row is None:
            row = vocabulary_check(a, b, info, load_info(_as_file(other)))
            if self.record:
                ClassCheck.objects.bulk_create([row], ignore_conflicts=True)
            self.known[(a, b)] = row
        # check_pair's order: the architecture rule first, then the vocabulary's.
        arch_ok = speculates(f.arch_kind) and speculates(other.arch_kind)
        failed_rule = "architecture" if not arch_ok else (row.failed_rule or None)
        return Verdict(arch_ok and row.compatible, row.compatible, failed_rule, row.rules_from)


def _as_file(other: GGUFFile | PartnerFile) -> GGUFFile:
    """The file as an object (a partner's row is read whole only where a check needs its tokens or inspection)."""
    return other if isinstance(other, GGUFFile) else _load([other.pk], whole=True)[other.pk]


def _first_compatible(
    verdicts: Verdicts, others: list[GGUFFile] | list[PartnerFile], f_is_target: bool
) -> tuple[Verdict, GGUFFile | PartnerFile] | None:
    """The verdict of ``f`` against each file in turn: the first compatible one, else the first checked."""
    first = None
    for other in others:
        v = verdicts.verdict(other, f_is_target)
        if v.compatible:
            return v, other
        first = first or (v, other)
    return first


def compute_pairs(
    f: GGUFFile, info: ModelInfo, record_classes: bool = True, fresh: bool = False
) -> tuple[int, int, list[int]]:
    """Pairs between ``f``'s base model and every other base model with a file that could pair with ``f``.

    A new pair is checked once, on ``f`` and one file of the partner (per tokenizer class it has). An existing
    pair is checked again only where ``f`` could change it: ``f`` is one of its two files (its header changed),
    or the pair is incompatible and ``f`` brings its side a tokenizer class the pair's file lacks. The twentieth
    quant of a model so costs two indexed reads, whatever the size of its family. A pair, and the results
    attached to it, is never dropped: its verdict is updated.

    ``fresh``: ``f`` was registered just now for the first time, so its base model's classes only grew (by ``f``'s,
    where that class is new to it): its other pairs are settled from what they hold (``settling.Gained``)
    rather than over every combination again. Otherwise (a file read again, whose class may have left its base
    model) they are settled the whole way.
    """
    base = f.model.base
    if base is None:
        return 0, 0, []
    new_class = _class_is_new(f, base)
    if new_class is None:
        if f.tokenizer_class_id is not None and _owner_is_new(f, base):
            # Nothing to check on f, but its class now stands higher in its model: rows showing another class may
            # move to it (combinations.choose puts standing first).
            rest = pair_rows(Pair.objects.filter(Q(target_base=base) | Q(draft_base=base)))
            settle(rest, known=Rose(base, f.tokenizer_class_id), record=record_classes).save()
        return 0, 0, []
    # The pairs of this base model as plain rows (a popular small draft has thousands), by the other side's base
    # model; as objects only those checked again below. Every one of them (its own pair, a pair a user asked for in
    # the other direction) is settled at the end.
    rows = pair_rows(Pair.objects.filter(Q(target_base=base) | Q(draft_base=base)))
    existing = _by_partner(rows, base)
    partners = partner_files(f, base, {b for b, row in existing.items() if row.compatible})
    # Checked again on f: f's own pairs (f changed), and incompatible pairs whose side f joins lacked f's class.
    objects = pair_objects(
        row.pk
        for b, row in existing.items()
        if f.pk in (row.target_id, row.draft_id)
        or (
            b in partners
            and not row.compatible
            and (row.target_class if row.target_base_id == base.pk else row.draft_class) != f.tokenizer_class_id
        )
    )
    # New pairs get a row only when worth listing (catalog.listing): read the listed pairs of every target here once.
    listing = Listing([base.pk, *(b for b, (other, _) in partners.items() if base_is_target(other, base))])
    batch = _Batch(f, base, Verdicts(f, info, record_classes), listing)
    mine = {b for b, p in existing.items() if f.pk in (p.target_id, p.draft_id)}
    # f's own pairs first, then partners smallest first: a target's places go to its smallest drafts.
    order = sorted(
        set(partners) | mine, key=lambda b: (b not in mine, rank(partners[b][0] if b in partners else None), b)
    )
    for partner_id in order:
        known = existing.get(partner_id)
        if known is not None and known.pk not in objects:
            continue  # the pair's own files are still its files: only its combinations changed (settled below)
        batch.check(partner_id, objects[known.pk] if known is not None else None, partners.get(partner_id))
    listing.drop()
    batch.write()
    # Every combination of the two sides' classes decides the verdict (all, partial, none) and which files the row
    # shows: by the sides' standing, never by what came last (registry.catalog.settling).
    done = {p.pk for p in [*batch.new, *batch.changed]} | set(listing.dropped)
    settled = settle(batch.changed, record=record_classes)  # (the new ones were settled before they were written)
    rest = [row for row in rows if row.pk not in done]
    settled.add(_settle_others(f, base, new_class, fresh, rest, batch.touched, record_classes))
    settled.save()
    return len(batch.new), len(batch.changed), batch.compatible


def _settle_others(
    f: GGUFFile, base: BaseModel, new_class: bool, fresh: bool, rest: list[PairRow], touched: list[Pair], record: bool
) -> Settled:
    """Settle ``rest``, the pairs of ``base`` this registration did not check again on ``f``: where ``f`` brought no
    class new to ``base``, only those whose combinations it changed (``touched``)."""
    if not new_class:
        pks = {row.pk for row in rest}
        return settle([p for p in touched if p.pk in pks], record=record)
    # Every other pair of this base model has one more combination per class of its partner, partners outside the new
    # class's candidate window included (those combinations fail on the class columns alone). (None for a base model
    # new to the registry: its pairs are all new, settled above, and with no other pair its partners' classes are
    # not read at all.) A file registered for the first time only added its class: the caller knows that much.
    if not rest:
        return Settled()
    known = Gained(base, f.tokenizer_class_id) if fresh and f.tokenizer_class_id is not None else None
    return settle(rest, known=known, record=record)


def _class_is_new(f: GGUFFile, base: BaseModel) -> bool | None:
    """Whether ``f`` brings its base model a tokenizer class it lacked; None where ``f`` brings nothing to check
    (registration checks no pair on it; its class may still stand higher: ``_owner_is_new``)."""
    if f.tokenizer_class_id is None:
        return True
    # Registration wrote the (base model, class) row with the file (registry.catalog.registration): it names
    # another file when the class was already the model's.
    seen = BaseClass.objects.filter(base=base, tokenizer_class_id=f.tokenizer_class_id).exclude(file=f).exists()
    if seen and not Pair.objects.filter(Q(target=f) | Q(draft=f)).exists():
        # Another quant with a tokenizer its model already had: the registration that brought that
        # class checked it against every partner (and partners that came later checked themselves), and no
        # pair was checked on this file, so nothing can change. The common case costs two indexed reads.
        return None
    return not seen


def _owner_is_new(f: GGUFFile, base: BaseModel) -> bool:
    """Whether ``f`` is the first file of its class in ``base`` from its repository's owner: then the class stands
    higher in the model (one more distinct owner, perhaps the publisher: combinations.standings)."""
    name = owner(f.repo)
    same = GGUFFile.objects.filter(model__base=base, tokenizer_class_id=f.tokenizer_class_id).exclude(pk=f.pk)
    mine = Q(repo__iexact=name) | Q(repo__istartswith=f"{name}/") if name else Q(repo="")
    return not same.filter(mine).exists()


def _by_partner(rows: list[PairRow], base: BaseModel) -> dict[int, PairRow]:
    """The pairs of ``base`` with another base model, by that model (the first where a pair goes each way)."""
    existing: dict[int, PairRow] = {}
    for row in rows:
        if row.target_base_id == base.pk and row.draft_base_id not in (None, base.pk):
            existing.setdefault(row.draft_base_id, row)
        elif row.draft_base_id == base.pk and row.target_base_id not in (None, base.pk):
            existing.setdefault(row.target_base_id, row)
    return existing


@dataclass
class _Batch:
    """The pairs one registration checks on its file ``f``: new ones, changed ones, and incompatible ones whose
    combinations changed (``touched``: settled later); what it wrote goes to the database in a few statements."""

    f: GGUFFile
    base: BaseModel
    verdicts: Verdicts
    listing: Listing
    now: datetime = field(default_factory=timezone.now)
    new: list[Pair] = field(default_factory=list)
    changed: list[Pair] = field(default_factory=list)
    compatible: list[int] = field(default_factory=list)  # files newly compatible with f
    touched: list[Pair] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)  # the columns pair_fields writes
    # (partner base model, its pair or None, the verdict, the other file, whether f is the target): admitted, unwritten
    pending: list[tuple[int, Pair | None, Verdict, GGUFFile | PartnerFile, bool]] = field(default_factory=list)

    def check(self, partner_id: int, pair: Pair | None, partner: tuple[BaseModel, list[PartnerFile]] | None) -> None:
        """Check ``f`` against the partner's files (against the pair's own other file where ``f`` is one of them)."""
        f, base = self.f, self.base
        if pair is not None and f.pk in (pair.target_id, pair.draft_id):
            # f changed: the same two files again
            others: list[GGUFFile] | list[PartnerFile] = [pair.draft if pair.target_id == f.pk else pair.target]
        else:
            others = partner[1] if partner is not None else []  # (a pair not on f is rechecked on its partner's)
        if pair is not None:
            f_is_target = pair.target_base_id == base.pk  # an existing pair keeps its direction
        elif partner is not None:
            f_is_target = base_is_target(base, partner[0])
        else:
            return  # (never: a new pair comes from a partner's files)
        found = _first_compatible(self.verdicts, others, f_is_target)
        if found is None:
            return
        result, other = found
        if pair is not None and f.pk not in (pair.target_id, pair.draft_id) and not result.compatible:
            self.touched.append(pair)  # still incompatible on the files it shows: its combinations changed
            return
        if pair is None and partner is not None:
            target_base, draft_base = (base, partner[0]) if f_is_target else (partner[0], base)
            if not self.listing.admit(target_base, draft_base, result.compatible):
                return  # compatible or not, it is answered from the classes (listing.unlisted_partners)
        if result.compatible and (pair is None or not pair.compatible):
            self.compatible.append(other.pk)
        self.pending.append((partner_id, pair, result, other, f_is_target))

    def _resolve(self) -> None:
        """The pending pairs as Pair objects, new or changed, their partners' files read in one query (the Pair's
        columns copy names from them)."""
        f, base = self.f, self.base
        new: list[Pair] = []
        files = _load([o.pk for _, pair, _, o, _ in self.pending if pair is not None and isinstance(o, PartnerFile)])
        for partner_id, pair, result, other, f_is_target in self.pending:
            if pair is None:
                tb, db = (base.pk, partner_id) if f_is_target else (partner_id, base.pk)
                new.append(Pair(target_base_id=tb, draft_base_id=db, checked_at=self.now))
                continue
            other_file = other if isinstance(other, GGUFFile) else files.get(other.pk)
            if other_file is None:
                continue  # deleted since it was read: the next registration of its model pairs it again
            t, d = (f, other_file) if f_is_target else (other_file, f)
            fields = pair_fields(result, t, d, self.now)
            self.columns = list(fields)
            if not pair.files_pinned:  # files staff chose stay (settle gives them their own verdict)
                pair.target, pair.draft = t, d
            for k, v in fields.items():
                setattr(pair, k, v)
            self.changed.append(pair)
        # Settled before they are written (every one changes: it had no files), so each row is inserted once: a row
        # inserted with the check's file and settled afterwards would be written twice for most base models with
        # several classes ("all" to "partial", the files moved to the best-standing classes), each time into every
        # index of the table.
        self.new = settle(new, record=self.verdicts.record).pairs
        self.pending = []

    def write(self) -> None:
        """Insert the new pairs, already settled (learning their ids), and update the changed ones."""
        self._resolve()
        base = self.base
        # A registration running beside this one may have written one of these pairs a moment ago: it is the
        # same pair, so the insert leaves it, and the ids come from one read (ON CONFLICT returns none).
        Pair.objects.bulk_create(self.new, batch_size=500, ignore_conflicts=True)
        if self.new:
            partner_ids = [p.draft_base_id if p.target_base_id == base.pk else p.target_base_id for p in self.new]
            mine_q = Q(target_base=base, draft_base_id__in=partner_ids) | Q(
                draft_base=base, target_base_id__in=partner_ids
            )
            ids: dict[tuple[int | None, int | None], int] = {
                (t, d): pk
                for pk, t, d in Pair.objects.filter(mine_q).values_list("pk", "target_base_id", "draft_base_id")
            }
            for p in self.new:
                p.pk = ids.get((p.target_base_id, p.draft_base_id))
            self.new = [p for p in self.new if p.pk is not None]
        if self.changed:
            # One UPDATE … FROM VALUES (registry.bulk_sql), not Django's bulk_update, which writes a CASE per row and
            # column: a new class rechecks a few hundred incompatible pairs here.
            bulk_set(Pair, self.changed, ["target", "draft", *self.columns], batch=500)
            # An answer stored before is out of date; the pair page computes the whole check from now on.
            PairCheckResult.objects.filter(pair__in=self.changed).delete()


def pair_for(target: GGUFFile, draft: GGUFFile) -> Pair:
    """The pair of these two files' base models in this order, checked now (on these files) when registration
    did not pair them. Its files may be other quants of the same two models: a run records the ones it measures.

    Registration pairs base models whose vocabularies could match, bigger as target; a user may still ask for
    any order, or for a model drafting for itself (the quickest end-to-end check).
    """
    pair = Pair.objects.filter(as_target(target), as_draft(draft)).first()
    if pair is not None:
        return pair
    result = check_pair(load_info(target), load_info(draft))
    with transaction.atomic():
        pair, created = Pair.objects.get_or_create(
            target_base_id=target.model.base_id,
            draft_base_id=draft.model.base_id,
            defaults={"target": target, "draft": draft, **pair_fields(result, target, draft, timezone.now())},
        )
        if created:
            PairCheckResult.objects.create(pair=pair, result=json_safe(result.to_dict()))
            # The verdict over every class combination; the files asked for stay the pair's files.
            for pc in pair_combinations([pair]):
                if pc.combos and pc.verdict != pair.verdict:
                    Pair.objects.filter(pk=pair.pk).update(verdict=pc.verdict)
                    pair.verdict = pc.verdict
    return pair
