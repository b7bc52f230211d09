"""Per-file truth for pairs of base models: one verdict per (target class, draft class) combination.

A pair joins two base models, but llama.cpp's rules read files, and the files of one base model do not always
share a tokenizer (a padded vocabulary, another token text, BOS added). Files with the same tokenizer data share
a class (registry.catalog.classes), so the verdict of every file pair of a row is the verdict of its two classes:
``ClassCheck`` (llama.cpp's vocabulary rules, stored once per two classes) plus the architecture rule of the two
classes' files. Combinations whose classes lie outside each other's candidate window (another vocabulary type,
sizes more than 128 apart) fail from the class columns alone, without reading a token table.

From the combinations follow the row's verdict (all, partial, none: ``Pair.verdict``), the files the row shows,
checks and benchmarks by default (``choose``), and N of M quants against a target file (read from the per-class
counts in ``BaseClass.files`` when a page asks, never stored per pair). Writing them on the pairs is
registry.catalog.settling's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from inspector.compat import check_pair
from inspector.info import ModelInfo
from inspector.llama_rules import LLAMA_CPP_BUILD, speculates
from inspector.tokens import MAX_SIZE_DIFFERENCE
from registry.catalog.stored import load_info
from registry.models import BaseClass, BaseModel, ClassCheck, GGUFFile, Pair, TokenizerClass

# Rules in check_pair's order; the class columns decide all but token_text.
RULES = ("vocab_type", "bos", "eos", "vocab_size", "token_text")


@dataclass
class Combination:
    target: BaseClass
    draft: BaseClass
    compatible: bool
    llama_cpp_compatible: bool
    failed_rule: str  # "" when compatible
    rules_from: str

    def to_dict(self) -> dict[str, object]:
        return {
            "target_class": self.target.tokenizer_class.fingerprint[:12],
            "draft_class": self.draft.tokenizer_class.fingerprint[:12],
            "compatible": self.compatible,
            "failed_rule": self.failed_rule or None,
        }


def special_method(spec: str | None) -> bool:
    """A sidecar or MTP draft is judged by its method's own rules, per file (inspector.compat._check_method)."""
    return bool(spec) and spec != "draft-simple"


def _special_file(f: GGUFFile) -> bool:
    return special_method(f.speculative_type)


def vocabulary_check(a_id: int, b_id: int, first: ModelInfo, second: ModelInfo) -> ClassCheck:
    """llama.cpp's vocabulary rules (all but the architecture, which belongs to files) for classes ``a_id`` <=
    ``b_id``, decided on one file of each (unsaved). The rules are symmetric: either order."""
    r = check_pair(first, second)
    failed = next((c.rule for c in r.checks[1:] if c.ok is not True), "")
    return ClassCheck(a_id=a_id, b_id=b_id, compatible=not failed, failed_rule=failed, rules_from=r.rules_from)


def class_rule(a: TokenizerClass, b: TokenizerClass) -> str | None:
    """The first rule two classes fail that their columns decide (None: only the token texts can still fail)."""
    if a.vocab_type != b.vocab_type or a.vocab_type.startswith(("unknown:", "missing")) or not a.vocab_type:
        return "vocab_type"
    if a.add_bos != b.add_bos or (a.add_bos and a.bos_id != b.bos_id):
        return "bos"
    if a.add_eos != b.add_eos or (a.add_eos and a.eos_id != b.eos_id):
        return "eos"
    if abs(a.n_tokens - b.n_tokens) > MAX_SIZE_DIFFERENCE:
        return "vocab_size"
    return None


def sides(base_ids: Iterable[int | None]) -> dict[int, list[BaseClass]]:
    """Each base model's classes (with the first file of each), oldest first: one query."""
    out: dict[int, list[BaseClass]] = defaultdict(list)
    ids = {b for b in base_ids if b is not None}
    if not ids:
        return out
    rows = (
        BaseClass.objects.filter(base_id__in=ids)
        .select_related("tokenizer_class", "file__token_table", "file__model__family")
        .defer("file__info", "file__token_table__blob")  # read only where a check must load the file
        .order_by("pk")
    )
    for row in rows:
        out[row.base_id].append(row)
    return out


class ClassVerdicts:
    """llama.cpp's vocabulary rules for pairs of classes: stored rows read once, missing ones decided (and
    written, unless ``record`` is False: a caller's open transaction would hold the new rows' unique keys)."""

    def __init__(self, class_ids: Iterable[int], record: bool = True) -> None:
        ids = set(class_ids)
        self.record = record
        self.known: dict[tuple[int, int], ClassCheck] = {
            (r.a_id, r.b_id): r for r in ClassCheck.objects.filter(a_id__in=ids, b_id__in=ids)
        }

    def get(self, x: BaseClass, y: BaseClass) -> ClassCheck:
        a, b = sorted((x.tokenizer_class_id, y.tokenizer_class_id))
        row = self.known.get((a, b))
        if row is not None:
            return row
        rule = class_rule(x.tokenizer_class, y.tokenizer_class)
        if rule is not None:
            # Outside the candidate window or failing on BOS/EOS: decided from the columns, no token table read
            # (and not stored: a row per such combination would grow with the square of the classes).
            return ClassCheck(a_id=a, b_id=b, compatible=False, failed_rule=rule, rules_from=LLAMA_CPP_BUILD)
        row = vocabulary_check(a, b, load_info(x.file), load_info(y.file))
        if self.record:
            ClassCheck.objects.bulk_create([row], ignore_conflicts=True)
        self.known[(a, b)] = row
        return row


def combine(target: BaseClass, draft: BaseClass, verdicts: ClassVerdicts) -> Combination:
    """The verdict of every file of ``target``'s class drafting with every file of ``draft``'s class."""
    t, d = target.file, draft.file
    if _special_file(d) or _special_file(t):
        r = check_pair(load_info(t), load_info(d))
        return Combination(target, draft, r.compatible, r.llama_cpp_compatible, r.failed_rule or "", r.rules_from)
    row = verdicts.get(target, draft)
    # check_pair's order: the architecture rule first, then the vocabulary's.
    arch_ok = speculates(t.arch_kind) and speculates(d.arch_kind)
    failed = "architecture" if not arch_ok else row.failed_rule
    return Combination(target, draft, arch_ok and row.compatible, row.compatible, failed, row.rules_from)


def verdict_of(combos: list[Combination]) -> str:
    good = sum(c.compatible for c in combos)
    if combos and good == len(combos):
        return Pair.VERDICT_ALL
    return Pair.VERDICT_PARTIAL if good else Pair.VERDICT_NONE


@dataclass(frozen=True)
class Standing:
    """How far a class of a base model is its own: files from the publisher the Hub card names, then the number
    of distinct repository owners (uploading many files wins nothing), then the earliest registered."""

    publisher: bool
    owners: int
    first: int

    def key(self) -> tuple[int, int, int]:
        return (0 if self.publisher else 1, -self.owners, self.first)


def owner(repo: str) -> str:
    return repo.split("/", 1)[0].lower() if repo else ""


def standings(bases: dict[int, BaseModel], by_base: dict[int, list[BaseClass]]) -> dict[tuple[int, int], Standing]:
    """Each class's standing in its base model; the owners are read only for base models with several classes."""
    out: dict[tuple[int, int], Standing] = {}
    several = [b for b, rows in by_base.items() if len(rows) > 1]
    owners: dict[tuple[int, int], set[str]] = defaultdict(set)
    if several:
        rows = (
            GGUFFile.objects.filter(model__base_id__in=several, tokenizer_class__isnull=False)
            .order_by()  # (the model's default order by source would make every file distinct)
            .values_list("model__base_id", "tokenizer_class_id", "repo")
            .distinct()
        )
        for base_id, class_id, repo in rows:
            owners[(base_id, class_id)].add(owner(repo))
    for base_id, classes in by_base.items():
        base = bases.get(base_id)
        pub = (base.publisher or "").lower() if base else ""
        for bc in classes:
            names = owners.get((base_id, bc.tokenizer_class_id)) or {owner(bc.file.repo)}
            out[(base_id, bc.tokenizer_class_id)] = Standing(bool(pub) and pub in names, len(names), bc.file_id)
    return out


def choose(combos: list[Combination], standing: dict[tuple[int, int], Standing]) -> Combination | None:
    """The combination a row shows: each side's best-standing class first (the publisher's files, then the class
    most owners uploaded), a compatible combination within equal standing, then the draft of the target's exact
    class. Standing comes first so that a newcomer's near-miss variant, compatible where the established files are
    not, never becomes the file a row shows and its download line names."""

    def key(c: Combination) -> tuple[tuple[int, int], tuple[int, int], bool, bool, int, int]:
        t = standing[(c.target.base_id, c.target.tokenizer_class_id)].key()
        d = standing[(c.draft.base_id, c.draft.tokenizer_class_id)].key()
        # Within equal standing (publisher, owners), the draft of the target's own class (the plain quant beside a
        # near-miss variant), and only then the earliest registered: what came first never decides alone.
        exact = c.draft.tokenizer_class_id == c.target.tokenizer_class_id
        return (t[:2], d[:2], not c.compatible, not exact, t[2], d[2])

    return min(combos, key=key, default=None)


@dataclass
class PairCombinations:
    pair: Pair
    target_classes: list[BaseClass]
    draft_classes: list[BaseClass]
    combos: list[Combination]
    chosen: Combination | None
    verdict: str  # over every combination (verdict_of)


def pair_combinations(pairs: list[Pair], record: bool = True) -> list[PairCombinations]:
    """Every combination of these pairs' classes, with the combination each should show: batched reads."""
    by_base = sides([b for p in pairs for b in (p.target_base_id, p.draft_base_id)])
    bases = {b.pk: b for b in BaseModel.objects.filter(pk__in=list(by_base))}
    standing = standings(bases, by_base)
    verdicts = ClassVerdicts((bc.tokenizer_class_id for rows in by_base.values() for bc in rows), record)
    out = []
    for p in pairs:
        ts, ds = by_base.get(p.target_base_id or -1, []), by_base.get(p.draft_base_id or -1, [])
        if p.target_base_id == p.draft_base_id:  # a model's own pair (draftless methods): its own files together
            combos = [combine(t, t, verdicts) for t in ts]
        else:
            combos = [combine(t, d, verdicts) for t in ts for d in ds]
        out.append(PairCombinations(p, ts, ds, combos, choose(combos, standing), verdict_of(combos)))
    return out


def class_of_file(f: GGUFFile) -> BaseClass | None:
    """``f``'s class row in its base model (the row of its class and base, whichever file it names)."""
    if f.tokenizer_class_id is None or f.model.base_id is None:
        return None
    return (
        BaseClass.objects.filter(base_id=f.model.base_id, tokenizer_class_id=f.tokenizer_class_id)
        .select_related("tokenizer_class", "file__token_table", "file__model")
        .defer("file__token_table__blob")
        .first()
    )


def compatible_quants(rows: list[tuple[int, int | None, int | None, int | None]]) -> dict[int, tuple[int, int]]:
    """N of M for table rows given as (pair id, target base model, target file's class, draft base model): M the
    draft base model's files, N those whose combination with the target file's class is compatible. A few
    queries for a page, whatever the sizes of the families."""
    by_base = sides(b for _, t, _, d in rows for b in (t, d))
    verdicts = ClassVerdicts(bc.tokenizer_class_id for v in by_base.values() for bc in v)
    out = {}
    for pk, tb, tc, db in rows:
        ds = by_base.get(db or -1, [])
        mine = next((bc for bc in by_base.get(tb or -1, []) if bc.tokenizer_class_id == tc), None)
        n = 0 if mine is None else sum(bc.files for bc in ds if combine(mine, bc, verdicts).compatible)
        out[pk] = (n, sum(bc.files for bc in ds))
    return out


def file_verdicts(target: GGUFFile, draft_base_id: int, limit: int = 200) -> list[dict[str, object]]:
    """Every registered file of a draft base model (up to ``limit``), judged against ``target``'s own file."""
    mine = class_of_file(target)
    by_base = sides([draft_base_id])
    verdicts = ClassVerdicts(
        [bc.tokenizer_class_id for bc in by_base.get(draft_base_id, [])] + ([mine.tokenizer_class_id] if mine else [])
    )
    per_class: dict[int, tuple[bool, str | None]] = {}
    for bc in by_base.get(draft_base_id, []):
        if mine is None:
            per_class[bc.tokenizer_class_id] = (False, "vocab_type")
            continue
        mine.file = target  # judged against the target's own file (its architecture, its method)
        c = combine(mine, bc, verdicts)
        per_class[bc.tokenizer_class_id] = (c.compatible, c.failed_rule or None)
    files = (
        GGUFFile.objects.filter(model__base_id=draft_base_id)
        .order_by("pk")
        .values_list("source", "tokenizer_class_id", "arch_kind")[:limit]
    )
    out = []
    for source, class_id, kind in files:
        ok, rule = per_class.get(class_id, (False, "vocab_type"))
        if ok and not speculates(kind):
            ok, rule = False, "architecture"
        out.append({"source": source, "compatible": ok, "failed_rule": rule})
    return out


def classes_dict(rows: list[BaseClass], visible: int = 50) -> list[dict[str, object]]:
    """A side's classes for the API: ``{"class", "files_count", "files": [≤50 sources]}``."""
    ids = [bc.tokenizer_class_id for bc in rows]
    files: dict[int, list[str]] = defaultdict(list)
    if ids:
        base_ids = {bc.base_id for bc in rows}
        q = GGUFFile.objects.filter(model__base_id__in=base_ids, tokenizer_class_id__in=ids).order_by("pk")
        for class_id, source in q.values_list("tokenizer_class_id", "source")[: visible * len(ids)]:
            if len(files[class_id]) < visible:
                files[class_id].append(source)
    return [
        {
            "class": bc.tokenizer_class.fingerprint[:12],
            "files_count": bc.files,
            "files": files[bc.tokenizer_class_id],
            "more": max(0, bc.files - len(files[bc.tokenizer_class_id])),
        }
        for bc in rows
    ]
