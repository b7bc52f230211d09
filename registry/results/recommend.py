"""The llama-server command a pair page recommends, from its best result (speculation only above 1×)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from inspector.llama_flags import LlamaCppError, pinned_server_capabilities
from inspector.llama_rules import LLAMA_CPP_BUILD
from inspector.spec_flags import (
    DRAFT_MODEL_METHODS,
    MAX_K,
    Setting,
    chain_beats_parts,
    chain_parts,
    own_option,
    uses_draft_file,
)
from registry.models import BenchmarkResult, BenchmarkRun, GGUFFile, speculation_setting
from registry.results.deploy import Deployment, deployment, download_command, download_commands, model_path
from registry.results.figures import Figure
from registry.results.standing import CONTENDED, NO_GAIN, ONE_REPEAT

STARTING_K = 8  # untested pairs: the middle of the runner's default sweep (4, 8, 16)


@dataclass
class Recommendation:
    use_draft: bool
    k: int | None
    basis: str  # one sentence: where the choice comes from
    command: str
    download: str  # how to get the files the command names


def _setting(f: Figure) -> Setting:
    """The best result's setting as the runner wrote it (runner/store.py deploys the same), so the pair
    page and the run page show one command; reported results carry only a method and K."""
    options = getattr(f.obj, "options", None) or ()
    return Setting(f.method or "draft-simple", f.k, getattr(f.obj, "p_min", None), tuple(tuple(o) for o in options))


def _untested_setting(target: GGUFFile, draft: GGUFFile) -> Setting:
    """K=STARTING_K with the method the draft file offers (an EAGLE-3 head needs its --spec-type)."""
    method = draft.speculative_type if draft.pk != target.pk else None
    return Setting(method if method in DRAFT_MODEL_METHODS else "draft-simple", STARTING_K)


def beyond_spread(f: Figure) -> bool:
    """Whether a figure's gain may be headlined (registry.results.standing, the runner's own rule): measured in at
    least two interleaved pairs, none reaching 1, on a quiet machine; reported figures, and results measured before the
    pairs' range was kept, count as they are."""
    return not f.note


def _why_not(f: Figure) -> str:
    """Why the fastest figure above 1 is not recommended, and what would tell."""
    obj = f.obj
    if f.note == ONE_REPEAT:
        return "was measured in 1 repeat, which cannot tell a gain from noise: benchmark again with more repeats"
    if f.note == CONTENDED:
        share = getattr(obj, "other_cpu_share", None) or 0.0
        return f"was measured while other work took {share:.0%} of the CPU: benchmark again on a quiet machine"
    if f.note == NO_GAIN:
        return (
            f"lies within its spread ({obj.speedup_min:.2f}–{obj.speedup_max:.2f}× over {obj.pairs} interleaved "
            "pairs): run without a draft, or benchmark again with more repeats"
        )
    return "did not measurably beat its methods alone: run the fastest of them instead"


def best_gain(figures: list[Figure]) -> Figure | None:
    """The fastest figure with a gain that counts (above 1 and beyond its spread): what a pair recommends and soaks.
    A chain counts only where it measurably beats its methods alone (``chain_wins``)."""
    fast = [
        f for f in figures if f.speedup is not None and f.speedup > 1 and beyond_spread(f) and chain_wins(f, figures)
    ]
    return max(fast, key=lambda f: f.speedup or 0.0) if fast else None


def chain_wins(f: Figure, figures: list[Figure]) -> bool:
    """Whether ``f``, if a chain (ngram-mod+draft-simple), was faster in its slowest interleaved pair than the fastest
    figure of one of its methods alone (as runner.sweep.sweep decides it for a run); a single method always passes."""
    parts = chain_parts(f.method or "")
    alone = [g.speedup for g in figures if g.method in parts and g.speedup is not None]
    low = getattr(f.obj, "speedup_min", None) if f.kind == "measured" else None
    return chain_beats_parts(f.method or "", low if low is not None else f.speedup, alone)


def recommend(
    target: GGUFFile, draft: GGUFFile, compatible: bool, measured: list[Figure], reported: list[Figure]
) -> Recommendation:
    figures, kind = (measured, "measured") if measured else (reported, "reported")
    b = best_gain(figures)
    use, k, basis = _verdict(compatible, figures, kind, b)
    setting = (_setting(b) if b is not None else _untested_setting(target, draft)) if use else None
    with_draft = setting is not None and uses_draft_file(setting.method)
    measured_by = b.obj if use and kind == "measured" and b is not None else None
    if isinstance(measured_by, BenchmarkResult):
        # Deployed = measured: the quants the run measured, which need not be the two the pair was checked on.
        target, draft = measured_by.run.measured_target, measured_by.run.measured_draft
    downloads = download_commands(target, draft if with_draft else None)  # exactly the files the command runs
    if isinstance(measured_by, BenchmarkResult) and _written_command_holds(measured_by):
        # The command the run that measured this best wrote, word for word (the run page shows it too).
        return Recommendation(
            use,
            k,
            basis + f" Command as written by run {measured_by.run_id}.",
            measured_by.run.server_command,
            downloads,
        )
    # The measured slots (-np) go into the command: deployed = measured, at the concurrency the figure holds for.
    parallel = measured_by.parallel if isinstance(measured_by, BenchmarkResult) else None
    # A draftless method (n-gram, own MTP heads) names no -md: deployment leaves the draft out.
    caps = pinned_server_capabilities()
    try:
        command = deployment(
            caps, model_path(target), model_path(draft) if with_draft else None, k, setting=setting, parallel=parallel
        ).command
    except LlamaCppError as exc:  # a method imported from another installation that this build lacks
        return Recommendation(
            False,
            None,
            basis + f" {exc}: run the target alone.",
            deployment(caps, model_path(target), None, None).command,
            download_command(target),
        )
    return Recommendation(
        use,
        k,
        basis + f" Flags of llama.cpp {LLAMA_CPP_BUILD}; builds before the --spec-* options use --draft-max instead.",
        command,
        downloads,
    )


def _written_command_holds(result: BenchmarkResult) -> bool:
    """Whether the run that measured ``result`` wrote a command that deploys it as measured: its own run (an
    imported run's text is never shown), at the concurrency the run deployed for."""
    return (
        not result.run.origin_installation
        and bool(result.run.server_command)
        and result.clients == result.run.summary.get("deploy_clients", 1)
    )


def _verdict(compatible: bool, figures: list[Figure], kind: str, b: Figure | None) -> tuple[bool, int | None, str]:
    """Whether to speculate, with which K, and the sentence that says why, from the best figure ``b`` of ``kind``."""
    if not compatible:
        return False, None, "The draft is not compatible with this target: run the target alone."
    if b is not None:
        where = f" on {b.hardware}" if b.hardware else ""
        basis = (
            f"Best {kind} result: K={b.k}, {b.speedup:.2f}× faster"
            + (f", {b.acceptance:.0%} of drafts accepted" if b.acceptance is not None else "")
            + (f" ({b.content_type})" if b.content_type else "")
            + (f" at {b.clients} concurrent clients" if b.clients > 1 else "")
            + where
            + "."
        )
        if kind == "reported":
            basis += " Reported, not measured here: benchmark the pair on your hardware before relying on it."
        return True, b.k, basis
    if within := [f for f in figures if f.speedup is not None and f.speedup > 1]:
        w = max(within, key=lambda f: f.speedup or 0.0)
        return False, None, f"No measurable gain: the best {kind} result, K={w.k} at {w.speedup:.2f}×, {_why_not(w)}."
    if figures:
        speeds = [f.speedup for f in figures if f.speedup is not None]
        return (
            False,
            None,
            f"No {kind} result is faster than the target alone (best {max(speeds):.2f}×): run without a draft."
            if speeds
            else f"The {kind} results carry no speed: run without a draft.",
        )
    return (
        True,
        STARTING_K,
        f"Not benchmarked yet: K={STARTING_K} is a starting point, not a measurement. "
        "Benchmark the pair; speculation can be slower than the target alone (it was on 2 CPU cores).",
    )


def own_options(setting: Setting) -> bool:
    """Whether each of the setting's options is one its method sweeps (an n-gram method's second size), with a
    value of digits: the only options specreg's runs ever write, so the only ones a rebuilt command may carry."""
    return all(own_option(setting.method, o) for o in setting.options)


def rebuilt_deployment(run: BenchmarkRun) -> Deployment | None:
    """The command and unit of a run imported from another installation, rebuilt with the one deployment builder from
    its best measured setting (at the concurrency it deploys for) and the files it measured, never its own text:
    an imported ``…; curl … | sh #`` would otherwise reach the pair page and the downloads word for word. None when
    nothing measured gained or the setting is out of the benchmark's bounds."""
    clients = run.summary.get("deploy_clients", 1) if isinstance(run.summary, dict) else 1
    results = [r for r in run.results.filter(status="ok", speculation_ran=True) if r.speedup]
    best = max((r for r in results if r.clients == clients), key=lambda r: r.speedup or 0, default=None)
    if best is None:
        return None
    setting = speculation_setting(best)
    if not 1 <= setting.k <= MAX_K or not own_options(setting):
        return None
    parallel = best.parallel if best.parallel and 1 <= best.parallel <= settings.SPECREG_MAX_CLIENTS else None
    target, draft = run.measured_target, run.measured_draft
    try:
        return deployment(
            pinned_server_capabilities(),
            model_path(target),
            model_path(draft) if uses_draft_file(setting.method) else None,
            setting.k,
            setting=setting,
            parallel=parallel,
        )
    except LlamaCppError:  # a method this build lacks
        return None


def shown_command(run: BenchmarkRun) -> tuple[str, str]:
    """The llama-server command and systemd unit a run's pages, API and downloads show: a run made here keeps what it
    wrote; an imported one's are rebuilt (``rebuilt_deployment``), empty when nothing can be. A run that did not end
    done (failed, cancelled, still running) shows none: it measured nothing a deployment could rest on, and a failed
    one still wrote the target's plain command."""
    if run.status != BenchmarkRun.DONE:
        return "", ""
    if not run.origin_installation:
        return run.server_command, run.systemd_unit
    built = rebuilt_deployment(run)
    return (built.command, built.unit) if built is not None else ("", "")
