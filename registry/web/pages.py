"""What the model and pair pages show, gathered once for the HTML page and its JSON twin."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, F
from django.http import Http404
from django.shortcuts import get_object_or_404

from inspector.info import refreshed
from inspector.spec_flags import draft_label, is_draftless
from registry.catalog.adaptable import adaptable_drafts, for_pairs
from registry.catalog.combinations import PairCombinations, classes_dict, pair_combinations
from registry.catalog.listing import unlisted_partners
from registry.catalog.pairing import as_draft, as_target
from registry.catalog.provenance import AdaptedFrom, adapted_from
from registry.catalog.recheck import STALE
from registry.models import (
    AdaptCheck,
    BaseClass,
    BaseModel,
    GGUFFile,
    Model,
    Pair,
    PairRedirect,
    StabilityResult,
    VerdictChange,
)
from registry.pair_state import state_of
from registry.results.figures import Figure, PredictionRunInfo, figures_for, prediction_runs
from registry.results.history import BuildChange, build_changes
from registry.results.predicted import Comparison, ErrorSummary, compare, error_summary
from registry.results.recommend import Recommendation, recommend
from registry.web.plot import clients_svg, latest_soak_svg, speed_acceptance_svg

RULE_TITLES = {
    "architecture": "Architecture (how the state is rolled back)",
    "vocab_type": "1. Vocabulary type",
    "bos": "2. BOS token",
    "eos": "3. EOS token",
    "vocab_size": "4. Vocabulary size (±128)",
    "token_text": "5. Token texts from id 5",
}
PARTNER_LIMIT = 200


@dataclass
class ModelPage:
    model: Model
    files: list[GGUFFile]
    file: GGUFFile
    drafts: list[Pair]  # compatible drafts when the file is the target
    targets: list[Pair]  # compatible targets when it is the draft
    ways: list[Way] = None  # type: ignore[assignment]  # ways to speed the file up as a target
    base: BaseSummary | None = None
    # Compatible base models without a listed pair (catalog.listing): drafts smallest first, targets biggest first.
    more_drafts: list[BaseClass] = field(default_factory=list)
    more_targets: list[BaseClass] = field(default_factory=list)
    adapted: AdaptedFrom | None = None  # the file is a draft adapt_draft made: from what, for what
    # Incompatible drafts adapt_draft can give this file's special tokens (stored decisions: a page decides none).
    adaptable: list[tuple[Pair, AdaptCheck]] = field(default_factory=list)


@dataclass
class BaseSummary:
    """The model across repositories: its base model, how it was grouped, where its quants are."""

    base: BaseModel
    repositories: list[Repository]  # one per repository (or local folder) holding its quants
    quants: int


@dataclass
class Repository:
    model: Model
    quants: int


@dataclass
class Way:
    """The best result of one method on one content type for this target, of one kind of figure."""

    method: str
    content_type: str
    kind: str  # measured, predicted or reported: never mixed in one row
    draft: str  # the draft model's name, or what a draftless method uses
    figure: Figure


def model_page(pk: int, file_id: str | None) -> ModelPage:
    model = get_object_or_404(Model.objects.select_related("family", "base"), pk=pk)
    files = list(model.files.order_by("path"))
    if not files:
        raise Http404("this model has no files")
    chosen = next((f for f in files if str(f.pk) == (file_id or "")), files[0])
    order = (F("best_speedup").desc(nulls_last=True), F("size_ratio").desc(nulls_last=True), "pk")
    lean = ("target__info", "draft__info")
    drafts = list(
        Pair.objects.filter(as_target(chosen), compatible=True)
        .select_related("draft__model", "target__model")
        .defer(*lean)
        .order_by(*order)[:PARTNER_LIMIT]
    )
    targets = list(
        Pair.objects.filter(as_draft(chosen), compatible=True)
        .select_related("target__model", "draft__model")
        .defer(*lean)
        .order_by(*order)[:PARTNER_LIMIT]
    )
    return ModelPage(
        model,
        files,
        chosen,
        drafts,
        targets,
        ways_to_speed_up(chosen),
        base_summary(model),
        unlisted_partners(chosen, "draft"),
        unlisted_partners(chosen, "target"),
        adapted_from(chosen.info or {}, model.base, chosen.pk),
        adaptable_drafts(chosen, limit=PARTNER_LIMIT, decide=False),
    )


def base_summary(model: Model) -> BaseSummary | None:
    if model.base is None:
        return None
    rows = Model.objects.filter(base=model.base).annotate(n=Count("files")).order_by("repo", "name")[:PARTNER_LIMIT]
    quants = GGUFFile.objects.filter(model__base=model.base).count()
    return BaseSummary(model.base, [Repository(m, m.n) for m in rows], quants)


def ways_to_speed_up(target: GGUFFile) -> list[Way]:
    """Method x content type: the best measured, predicted and reported speed-up with this file as the target
    (with any draft, or draftless on its own pair), fastest first within each kind."""

    pairs = {
        p.pk: p
        for p in Pair.objects.filter(as_target(target), compatible=True)
        .select_related("draft__model")
        .only("pk", "draft_id", "target_id", "draft__model__name")[:PARTNER_LIMIT]
    }
    best: dict[tuple[str, str, str], Way] = {}
    for pid, figs in figures_for(list(pairs)).items():
        p = pairs[pid]
        for kind, items in figs.items():
            for f in items:
                if f.speedup is None:
                    continue
                draft = draft_label(f.method) if is_draftless(f.method) else p.draft.model.name
                key = (f.method, f.content_type, kind)
                if key not in best or f.speedup > (best[key].figure.speedup or 0):  # stored ones have a speedup
                    best[key] = Way(f.method, f.content_type, kind, draft, f)
    # Measured here first, then predicted here (same machine class, not yet confirmed), then reported elsewhere.
    order = {"measured": 0, "predicted": 1, "reported": 2}
    return sorted(best.values(), key=lambda w: (order.get(w.kind, 3), -(w.figure.speedup or 0)))


def tokenizer_view(info: dict[str, Any]) -> dict[str, Any] | None:
    """Stored vs effective BOS/EOS settings side by side, for people."""
    tok = info.get("tokenizer")
    if not tok:
        return None
    return {
        "rows": [
            ("add_bos", tok["add_bos_stored"], tok["add_bos"]),
            ("add_eos", tok["add_eos_stored"], tok["add_eos"]),
        ],
        "bos_id": tok["bos_id"],
        "eos_id": tok["eos_id"],
        "bos_defaulted": tok["bos_defaulted"],
        "eos_defaulted": tok["eos_defaulted"],
        "special": sorted(tok.get("special", {}).items()),
    }


def inspection_context(info: dict[str, Any]) -> dict[str, Any]:
    """What the "What the header says" section needs, from a stored or fresh ModelInfo dict (read as this build's
    rules decide: ``inspector.info.refreshed``)."""
    info = refreshed(info)
    return {
        "info": info,
        "tok": tokenizer_view(info),
        "metadata": sorted(info.get("metadata", {}).items()),
        "tensor_types": sorted(info.get("tensor_types", {}).items(), key=lambda kv: -kv[1]),
    }


@dataclass
class PairPage:
    pair: Pair
    checks: list[dict[str, Any]]
    measured: list[Figure]
    reported: list[Figure]
    measured_plot: str
    reported_plot: str
    recommendation: Recommendation
    history: list[BuildChange]  # cells a newer llama.cpp build made faster or slower (registry.results.history)
    verdict_changes: list[VerdictChange]  # verdicts recheck_pairs changed, newest first
    predicted: list[Comparison]  # each prediction with the measurement of its setting, if any
    prediction_errors: ErrorSummary | None
    # Measured under load (several clients at once) and soaks (stability), newest first.
    load: list[Figure] = field(default_factory=list)
    load_plot: str = ""
    stability: list[StabilityResult] = field(default_factory=list)
    stability_plot: str = ""
    # Each side's files by tokenizer class and every combination's verdict (registry.catalog.combinations).
    combinations: PairCombinations | None = None
    target_classes: list[dict[str, Any]] = field(default_factory=list)
    draft_classes: list[dict[str, Any]] = field(default_factory=list)
    # Every prediction run of the pair, newest first: ``predicted`` shows only the chosen one per hardware class
    # (registry.results.figures.prediction_runs), so the others are listed with their size, build and date.
    prediction_runs: list[PredictionRunInfo] = field(default_factory=list)
    # Whether adapt_draft could make the draft acceptable (registry.catalog.adaptable): None for a pair whose
    # verdict leaves no room for it (compatible, or failing another rule than bos, eos or token_text).
    adaptability: AdaptCheck | None = None

    @property
    def side_classes(self) -> list[tuple[str, list[dict[str, Any]]]]:
        return [("Target", self.target_classes), ("Draft", self.draft_classes)]

    @property
    def state(self) -> dict[str, Any]:
        """How llama.cpp rolls the pair back after a rejected draft, and what that costs (registry.pair_state)."""
        return state_of(self.pair).to_dict()

    @property
    def stale(self) -> bool:
        """The verdict is an older build's, kept until ``recheck_pairs --stale`` (registry.catalog.recheck)."""
        return self.pair.rules_from.endswith(STALE)


def explained_checks(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**c, "title": RULE_TITLES.get(c["rule"], c["rule"])} for c in result.get("checks", [])]


def merged_into(pk: int) -> int | None:
    """Where a pair id went when pairs of files merged into pairs of base models (None: not merged)."""
    if Pair.objects.filter(pk=pk).exists():
        return None
    return PairRedirect.objects.filter(old_id=pk).values_list("pair_id", flat=True).first()


def pair_page(pk: int) -> PairPage:
    pair = get_object_or_404(Pair.objects.select_related("target__model", "draft__model", "check_result"), pk=pk)
    figs = figures_for([pair.pk])[pair.pk]
    measured, reported = figs["measured"], figs["reported"]
    predicted = compare(figs["predicted"], measured)
    load = [f for f in measured if f.clients > 1]
    one_client = [f for f in measured if f.clients == 1]
    stability = stability_results(pair=pair)
    pc = pair_combinations([pair])[0]
    return PairPage(
        pair,
        explained_checks(pair.result),
        measured,
        reported,
        speed_acceptance_svg(one_client, "Measured speedup and acceptance against K (one client)"),
        speed_acceptance_svg(reported, "Reported speedup and acceptance against K"),
        recommend(pair.target, pair.draft, pair.compatible, measured, reported),
        build_changes(pair.pk),
        list(pair.verdict_changes.all()[:20]),
        predicted,
        error_summary(predicted),
        load,
        clients_svg(measured, "Measured speedup against concurrent clients"),
        stability,
        latest_soak_svg(stability),
        pc,
        classes_dict(pc.target_classes),
        classes_dict(pc.draft_classes),
        prediction_runs([pair.pk]),
        for_pairs([pair]).get(pair.pk),
    )


def stability_results(**where: Any) -> list[StabilityResult]:
    """Soak records (a pair's, or a deployment's with ``deployment_ref=``), newest first."""
    return list(StabilityResult.objects.filter(**where).select_related("run").order_by("-pk")[:20])


def files_for_datalist(limit: int = 500, *, local: bool = True) -> list[str]:
    """Registered sources to offer on the check form; without ``local`` only Hub files (no server paths)."""
    qs = GGUFFile.objects.order_by("source")
    if not local:
        qs = qs.filter(source__startswith="hf://")
    return list(qs.values_list("source", flat=True)[:limit])
