"""Finding drafts for a target: compatible files already registered, then candidates searched on the Hub.

Sidecars (EAGLE-3 / DFlash / DSpark heads) are found and listed apart: they carry no token table, so
they are never vocabulary pairs; each is checked with its method's rules (inspector.speculative).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from django.db.models import F, QuerySet

from inspector.hub_api import search_models
from inspector.sources import SourceError
from inspector.speculative import SIDECAR_ARCHS
from registry.catalog.adaptable import adaptable_drafts
from registry.catalog.combinations import file_verdicts
from registry.catalog.listing import unlisted_partners
from registry.catalog.pairing import as_draft, as_target, pair_for
from registry.catalog.registration import finish
from registry.hub.importing import Entry, FileOutcome, HubImportError, import_entry, list_repo
from registry.hub.sources import SourceRegistrationError, register_source
from registry.models import AdaptCheck, BaseClass, GGUFFile, Pair
from registry.results.figures import figures_for

# "1.5B", "0.5b", "135M", "8x7B" — the size a repo or file name states.
_SIZE = re.compile(r"(?<![A-Za-z0-9.])(?:\d+x)?(\d+(?:\.\d+)?)([BbMm])(?![A-Za-z0-9])")
_PREFERRED_QUANTS = ("q8_0", "q4_k_m", "q6_k", "q5_k_m")
# How sidecar repositories name themselves (searched for); the file's header decides what it is.
SIDECAR_WORDS = ("eagle3", "dflash", "dspark")
SIDECAR_METHODS = ("draft-eagle3", "draft-dflash", "draft-dspark")


class DraftSearchError(Exception):
    """The target cannot be found or registered; one line."""


@dataclass
class HubCandidate:
    repo_id: str
    why: str
    status: str = "pending"  # compatible, incompatible, unrelated, skipped, failed (sidecars: "not a sidecar")
    message: str = ""
    pair: Pair | None = None
    sidecar: bool = False  # searched as an EAGLE-3 / DFlash sidecar, not as a draft model
    method: str = ""  # the file's speculative_type once inspected


@dataclass
class AdaptableDraft:
    """An incompatible registered draft that adapt_draft could make acceptable to the target."""

    pair: Pair
    check: AdaptCheck  # its plan: what adapting changes
    predicted_acceptance: float | None  # the pair's best predicted setting's, where one was predicted


@dataclass
class DraftSearch:
    target: GGUFFile
    registered: list[Pair]
    registered_sidecars: list[Pair] = field(default_factory=list)
    unlisted: list[BaseClass] = field(default_factory=list)  # compatible base models without a listed pair
    hub: list[HubCandidate] = field(default_factory=list)
    sidecars: list[HubCandidate] = field(default_factory=list)  # on the Hub, checked against the target
    hub_error: str = ""
    adaptable: list[AdaptableDraft] = field(default_factory=list)  # listed after the compatible ones

    @property
    def found(self) -> list[Pair]:
        return [c.pair for c in self.hub if c.status == "compatible" and c.pair is not None]


def resolve_target(text: str) -> GGUFFile:
    """A registered source, or an hf:// spec / local path registered on the way."""
    text = text.strip()
    if (f := GGUFFile.objects.filter(source=text).first()) is not None:
        return f
    if not text.startswith("hf://") and not os.path.exists(text):
        raise DraftSearchError(f"{text}: not a registered file, an hf://OWNER/REPO/PATH spec or an existing path")
    try:
        return register_source(text).file
    except SourceRegistrationError as exc:
        raise DraftSearchError(str(exc)) from None


def compatible_drafts(target: GGUFFile) -> QuerySet[Pair]:
    """Registered drafts for ``target`` (sidecars apart), fastest known first, then the biggest size ratio."""
    return (
        Pair.objects.filter(as_target(target), compatible=True)
        .exclude(draft__architecture__in=SIDECAR_ARCHS)
        .select_related("draft__model")
        .defer("draft__info")
        .order_by(F("best_speedup").desc(nulls_last=True), F("size_ratio").desc(nulls_last=True), "pk")
    )


def usable_drafts(target: GGUFFile) -> list[Pair]:
    """The compatible pairs with at least one draft file that works with ``target``'s own file (a pair of base models
    is compatible when any combination of their classes is), each with every draft file judged against it
    (``draft_files``: source, compatible, failed rule)."""
    out = []
    for p in compatible_drafts(target):
        files = file_verdicts(target, p.draft_base_id) if p.draft_base_id else []
        if files and not any(f["compatible"] for f in files):
            continue
        p.draft_files = files  # type: ignore[attr-defined]
        out.append(p)
    return out


def registered_sidecars(target: GGUFFile) -> list[Pair]:
    """Sidecars already paired with ``target``, compatible or not (their verdict is the point)."""
    return list(
        Pair.objects.filter(as_target(target), draft__architecture__in=SIDECAR_ARCHS)
        .select_related("draft")
        .order_by("-compatible", "pk")
    )


def sidecar_method(f: GGUFFile) -> str:
    return f.speculative_type


def size_from_name(name: str) -> float | None:
    """Parameters a name states (its last size token: a DRAFT repo names the target's size first)."""
    found = _SIZE.findall(name.rsplit("/", 1)[-1])
    if not found:
        return None
    number, unit = found[-1]
    return float(number) * (1e9 if unit in "Bb" else 1e6)


def family_stem(name: str) -> str | None:
    """``Qwen2.5-Coder-1.5B-Instruct`` → ``Qwen2.5-Coder``: what sibling sizes share in their names."""
    base = name.rsplit("/", 1)[-1]
    m = _SIZE.search(base)
    if m is None:
        return None
    stem = base[: m.start()].rstrip("-_. ")
    return stem if len(stem) >= 3 else None


def _base_models(target: GGUFFile) -> list[str]:
    bases: list[str] = []
    meta = target.info.get("metadata", {})
    for i in range(8):
        url = meta.get(f"general.base_model.{i}.repo_url")
        if isinstance(url, str) and "huggingface.co/" in url:
            bases.append(url.split("huggingface.co/", 1)[1].strip("/"))
        elif isinstance(meta.get(f"general.base_model.{i}.name"), str) and isinstance(
            meta.get(f"general.base_model.{i}.organization"), str
        ):
            bases.append(f"{meta[f'general.base_model.{i}.organization']}/{meta[f'general.base_model.{i}.name']}")
    if target.repo:
        for m in search_models(search=target.repo.split("/", 1)[1], limit=20):
            if m["id"] == target.repo:
                bases += m["base_models"]
    return list(dict.fromkeys(b for b in bases if "/" in b))


def hub_candidates(target: GGUFFile, limit: int) -> list[HubCandidate]:
    """Repositories worth checking: same family name, the target's model tree, purpose-built drafts."""
    bases = _base_models(target)
    stems = {s.lower() for s in map(family_stem, [target.model.name, target.repo, *bases]) if s}
    found: dict[str, tuple[int, int, str]] = {}  # repo -> (priority, -downloads, why)

    def add(results: list[dict], priority: int, why: str, need_stem: bool) -> None:
        for m in results:
            rid = m["id"]
            if need_stem and stems and not any(s in rid.lower() for s in stems):
                continue
            key = (priority, -(m.get("downloads") or 0), why)
            if rid not in found or key < found[rid]:
                found[rid] = key

    add(search_models(filter=["gguf", "draft"], limit=100), 0, "tagged draft", need_stem=True)
    add(search_models(search="draft", filter="gguf", limit=100), 0, "named *DRAFT*", need_stem=True)
    for base in bases:
        add(search_models(filter=f"base_model:{base}", limit=50), 1, f"model tree of {base}", need_stem=False)
    for stem in sorted(stems):
        add(search_models(search=stem, filter="gguf", limit=50), 2, f"same family name ({stem})", need_stem=False)

    registered = set(GGUFFile.objects.exclude(repo="").values_list("repo", flat=True).distinct())
    out = []
    for rid, (_, _, why) in sorted(found.items(), key=lambda kv: kv[1][:2]):
        if rid == target.repo or rid in registered:
            continue
        size = size_from_name(rid)
        if size is not None and target.parameter_count and size >= 0.9 * target.parameter_count:
            continue  # not smaller: it could not save time as a draft
        out.append(HubCandidate(rid, why))
        if len(out) >= limit:
            break
    return out


def _squash(name: str) -> str:
    """Letters and digits, lower case: "Qwen2.5-Coder-1.5B" and "qwen2_5-coder-1.5b" read alike."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def sidecar_candidates(target: GGUFFile, limit: int) -> list[HubCandidate]:
    """GGUF repos named like a sidecar (SIDECAR_WORDS) that point at the target: its model name (or its
    repo's, or a base model's) in their name, or the target's repo or base model in their model tree."""
    bases = _base_models(target)
    repo_names = [r.rsplit("/", 1)[-1] for r in (target.repo, *bases) if r]
    # "-GGUF" is how quant repos differ from the model; a sidecar's name carries the model's
    names = {n for n in (_squash(x).removesuffix("gguf") for x in (target.model.name, *repo_names)) if len(n) >= 4}
    found: dict[str, str] = {}
    for word in SIDECAR_WORDS:
        for m in search_models(search=word, filter="gguf", limit=100):
            if any(n in _squash(m["id"].rsplit("/", 1)[-1]) for n in names):
                found.setdefault(m["id"], f"named *{word}* after the target")
    for base in dict.fromkeys(b for b in (target.repo, *bases) if b):
        for word in SIDECAR_WORDS:
            for m in search_models(search=word, filter=["gguf", f"base_model:{base}"], limit=100):
                found.setdefault(m["id"], f"model tree of {base}")
    registered = set(GGUFFile.objects.exclude(repo="").values_list("repo", flat=True).distinct())
    out = [
        HubCandidate(rid, why, sidecar=True)
        for rid, why in found.items()
        if rid != target.repo and rid not in registered
    ]
    return out[:limit]


def choose_file(entries: list[Entry]) -> Entry | None:
    """One quant per repository is enough: every quant of a model carries the same vocabulary."""
    usable = [e for e in entries if not e.problem]
    for quant in _PREFERRED_QUANTS:
        for e in usable:
            if quant in e.path.lower():
                return e
    return min(usable, key=lambda e: e.size or 0, default=None)


def _import_choice(c: HubCandidate) -> FileOutcome | None:
    """Register one file of the candidate's repository; None (``c`` marked failed) when that cannot be done."""
    try:
        listing, entries = list_repo(c.repo_id)
    except HubImportError as exc:
        c.status, c.message = "failed", str(exc)
        return None
    entry = choose_file(entries)
    if entry is None:
        c.status, c.message = "failed", "no usable .gguf file"
        return None
    outcome = import_entry(listing, entry, None)
    if outcome.status == "failed":
        c.status, c.message = "failed", f"{entry.path}: {outcome.message}"
        return None
    return outcome


def check_candidate(target: GGUFFile, c: HubCandidate) -> None:
    outcome = _import_choice(c)
    if outcome is None or outcome.registered is None:  # (failed: None above)
        return
    found = outcome.registered.file
    if c.sidecar or found.architecture in SIDECAR_ARCHS:
        # A draft search can meet a sidecar too (a tagged or same-family repo): it is checked as one.
        c.sidecar = True
        _sidecar_verdict(target, c, found, outcome.source)
        return
    pair = Pair.objects.filter(as_target(target), as_draft(found)).first()
    if pair is None:
        if found.model.base_id is not None and found.model.base_id == target.model.base_id:
            c.status, c.message = "skipped", f"{outcome.path} is another quant of the target's own model"
        elif Pair.objects.filter(as_target(found), as_draft(target)).exists():
            c.status, c.message = "skipped", f"{outcome.path} is not smaller than the target"
        else:
            c.status, c.message = "unrelated", f"{outcome.path}: its vocabulary cannot match the target's"
        return
    c.pair = pair
    c.status = "compatible" if pair.compatible else "incompatible"
    c.message = outcome.source if pair.compatible else f"{outcome.source}: failed rule {pair.failed_rule}"


def _sidecar_verdict(target: GGUFFile, c: HubCandidate, side: GGUFFile, source: str) -> None:
    """The sidecar's method and its check against the target, recorded as a Pair (the pair page shows it)."""
    c.method = sidecar_method(side)
    if c.method not in SIDECAR_METHODS:
        c.status, c.message = "not a sidecar", f"{source}: {side.architecture}, {c.method or 'no speculation method'}"
        return
    c.pair = pair_for(target, side)
    c.status = "compatible" if c.pair.compatible else "incompatible"
    failed = next((ch for ch in c.pair.result.get("checks", []) if ch.get("ok") is not True), None)
    c.message = source + (f": {failed['rule']}: {failed['detail']}" if failed and not c.pair.compatible else "")


def find_drafts(target_text: str, *, hub: bool = True, limit: int = 5, progress=None) -> DraftSearch:
    target = resolve_target(target_text)
    search = DraftSearch(target, usable_drafts(target), registered_sidecars(target), unlisted_partners(target, "draft"))
    if hub:
        _search_hub(search, limit, progress)
    # After the Hub's: a near-miss found there is listed too.
    search.adaptable = adaptable_candidates(target)
    return search


def _search_hub(search: DraftSearch, limit: int, progress) -> None:
    target = search.target
    try:
        # Sidecars first: once registered, the draft search below skips their repos.
        search.sidecars = sidecar_candidates(target, limit)
        for c in search.sidecars:
            check_candidate(target, c)
            if progress:
                progress(c)
        search.hub = hub_candidates(target, limit)
    except SourceError as exc:
        search.hub_error = str(exc)
        return
    for c in search.hub:
        check_candidate(target, c)
        if progress:
            progress(c)
    # Repos the draft search found that turned out sidecars are listed with the sidecars.
    search.sidecars += [c for c in search.hub if c.sidecar]
    search.hub = [c for c in search.hub if not c.sidecar]
    # The near-misses the candidates made, with this target and with others, can be adapted or not: decided once.
    finish([target.pk, *(c.pair.draft_id for c in [*search.hub, *search.sidecars] if c.pair is not None)])


def adaptable_candidates(target: GGUFFile) -> list[AdaptableDraft]:
    """Registered near-miss drafts that adapt_draft could make acceptable to ``target`` (registry.catalog.adaptable),
    each with the best predicted acceptance its pair has, where a prediction exists."""
    found = adaptable_drafts(target)
    figs = figures_for([p.pk for p, _ in found])
    out = []
    for p, check in found:
        predicted = [f for f in figs[p.pk]["predicted"] if f.acceptance is not None]
        best = max(predicted, key=lambda f: (f.speedup or 0, f.acceptance or 0), default=None)
        out.append(AdaptableDraft(p, check, best.acceptance if best else None))
    return out
