"""Sweep speculation settings (method, K, p-min, the n-gram options) per content type and temperature, and
recommend the fastest one that beats the plain target."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from inspector.spec_flags import NGRAM_SWEEP, Setting, uses_draft_file
from runner.llama import binaries
from runner.measure.cli import BUSY_SHARE, Cancel, Cell, CellResult, Progress, measure_cell
from runner.methods import DEFAULT_KS, GRID, settings_for
from runner.prompts import ChatTemplate, TaskSet, read_chat_template, render_prompt
from runner.sweep.crashes import CrashDiagnosis

NO_DRAFT = "run without speculation"


@dataclass(frozen=True)
class SweepConfig:
    target: str
    draft: str
    task_set: TaskSet
    content_types: tuple[str, ...] | None = None  # None: every type in the task set
    temperatures: tuple[float, ...] = (0.0,)
    ks: tuple[int, ...] = DEFAULT_KS
    grid: tuple[int, ...] = GRID
    extend: bool = True  # try larger K while the largest measured K is still the fastest
    prompts_per_type: int | None = 2  # None: all prompts of the type
    n_predict: int = 128
    repeats: int = 3
    p_min: float | None = None  # one p-min for every draft-model setting (overrides p_mins)
    threads: int | None = None
    gpu_layers: int | None = None
    seed: int = 42
    ctx_size: int = 2048
    timeout_s: float = 600.0
    methods: tuple[str, ...] = ("draft-simple",)
    p_mins: tuple[float | None, ...] = (None,)  # draft models and MTP heads: each K at each p-min
    settings: tuple[Setting, ...] | None = None  # exactly these settings instead of methods x K x p-min
    via: str = "cli"  # "server": measured through llama-server, as deployed
    # A predicted sweep (runner.predict.runs): per content type, exactly these settings (no extension); a type
    # not named here gets the full plan.
    settings_by_type: dict[str, tuple[Setting, ...]] | None = None
    # Concurrent clients (via server, runner.measure.load): every setting is swept at the smallest, and the best two of
    # each content type are measured again at each larger one; slots (-np) equal the clients unless ``parallel``.
    clients: tuple[int, ...] = (1,)
    parallel: int | None = None

    @property
    def draft_p_mins(self) -> tuple[float | None, ...]:
        return (self.p_min,) if self.p_min is not None else self.p_mins


@dataclass(frozen=True)
class Recommendation:
    content_type: str
    temperature: float
    k: int | None  # None: speculation did not pay off
    speedup: float | None  # of the recommended K, or the best seen when none is recommended
    acceptance_rate: float | None
    reason: str
    caveat: str | None = None  # e.g. the deciding cell ran on a busy machine
    method: str | None = None  # of the recommended setting (None: run without speculation)
    p_min: float | None = None
    options: tuple[tuple[str, str], ...] = ()
    clients: int = 1  # the concurrency it holds for
    parallel: int = 1  # the slots (-np) it was measured with

    @property
    def use_draft(self) -> bool:
        """Whether to speculate (with a draft model or a draftless method)."""
        return self.k is not None

    @property
    def setting(self) -> Setting | None:
        return Setting(self.method or "draft-simple", self.k, self.p_min, self.options) if self.k is not None else None

    @property
    def summary(self) -> str:
        return f"{self.setting.label} ({self.speedup:.2f}x)" if self.setting else NO_DRAFT


@dataclass(frozen=True)
class SweepResult:
    config: SweepConfig
    status: str  # ok, failed, cancelled
    error: str | None
    cells: tuple[CellResult, ...]
    recommendations: tuple[Recommendation, ...]
    prompt_notes: tuple[str, ...] = ()  # e.g. the chat template failed and raw prompts were used
    elapsed_s: float = 0.0
    by_type: dict[str, list[CellResult]] = field(default_factory=dict, repr=False, compare=False)


def cell_speed(cell: CellResult) -> float | None:
    """What the sweep maximises: the speedup (same plain baseline per cell, so speeds compare)."""
    return cell.speedup if cell.status == "ok" and cell.speculation_ran else None


def next_k(speeds: dict[int, float | None], grid: Sequence[int]) -> int | None:
    """The next K to measure above the largest one, while the largest is still the fastest."""
    measured = {k: v for k, v in speeds.items() if v is not None}
    if not measured:
        return None
    top = max(measured)
    best = max(measured, key=lambda k: measured[k])
    if best != top:
        return None  # speed already fell past its peak
    above = sorted(g for g in grid if g > top and g not in speeds)
    return above[0] if above else None


MIN_PAIRS = 2  # one interleaved pair cannot tell a gain from noise


def measurable_gain(c: CellResult) -> bool:
    """Speculation gained beyond the measured spread: every interleaved pair (a speculative run over the plain run
    beside it, or under load a round over its plain round) was faster, in at least MIN_PAIRS pairs. One repeat
    cannot tell 1.01x from noise: SmolLM2 with ngram-mod on prose measured 0.92x-1.01x across near-identical
    settings (issue 20)."""
    p = c.pair_speedups
    return p is not None and p.n >= MIN_PAIRS and p.min > 1.0


def spread_text(c: CellResult) -> str:
    p = c.pair_speedups
    if p is None:
        return "no interleaved pair"
    return f"{p.n} interleaved pair{'s' if p.n != 1 else ''} from {p.min:.2f}x to {p.max:.2f}x"


def recommend(
    content_type: str, temperature: float, cells: Sequence[CellResult], clients: int = 1, parallel: int | None = None
) -> Recommendation:
    """The fastest setting (any method) whose gain is measurable (above 1 beyond its spread: ``measurable_gain``),
    else: run without speculation, and why; at ``clients`` concurrent requests (the cells' own)."""
    slots = parallel or clients
    usable = [c for c in cells if cell_speed(c) is not None]
    if not usable:
        failed = [c for c in cells if c.status != "ok"]
        if failed:
            reason = f"no setting completed: {failed[0].error or failed[0].status}"
        elif cells:
            reason = "speculation never ran (nothing was drafted)"
        else:
            reason = "nothing measured"
        return Recommendation(content_type, temperature, None, None, None, reason, clients=clients, parallel=slots)
    best = max(usable, key=lambda c: c.speedup or 0.0)  # every usable cell has a speedup
    busy = [c for c in cells if (c.other_cpu_share or 0) > BUSY_SHARE]
    caveat = None
    if busy:
        worst = max(c.other_cpu_share or 0 for c in busy)  # every busy cell has a share
        caveat = (
            f"other work used up to {100 * worst:.0f}% of the CPU during "
            f"{', '.join(c.cell.setting.label for c in busy)}; re-run on a quiet machine before relying on it"
        )
    gains = [c for c in usable if (c.speedup or 0.0) > 1.0 and measurable_gain(c)]
    if gains:
        best = max(gains, key=lambda c: c.speedup or 0.0)
    s = best.cell.setting
    if gains:
        return Recommendation(
            content_type,
            temperature,
            s.k,
            best.speedup,
            best.acceptance_rate,
            f"{s.label} was fastest: {best.speedup:.2f}x the target alone"
            + (f" ({spread_text(best)})" if best.pair_speedups else ""),
            caveat,
            s.method,
            s.p_min,
            s.options,
            clients=clients,
            parallel=slots,
        )
    if (best.speedup or 0.0) > 1.0:
        reason = (
            f"no measurable gain: {s.label} measured {best.speedup:.2f}x, within its spread ({spread_text(best)}); "
            "more repeats would tell"
        )
    else:
        reason = f"no setting beat the target alone (best: {s.label} at {best.speedup:.2f}x)"
    return Recommendation(
        content_type,
        temperature,
        None,
        best.speedup,
        best.acceptance_rate,
        reason,
        caveat,
        clients=clients,
        parallel=slots,
    )


def _prompts(
    config: SweepConfig, template: ChatTemplate | None, content_type: str, at_least: int = 1
) -> tuple[tuple[str, ...], list[str]]:
    """The type's prompts, rendered; ``at_least`` as many as there are clients (distinct prompts per round) where
    the task set has them."""
    tasks = config.task_set.by_type(content_type)
    if config.prompts_per_type is not None:
        tasks = tasks[: max(config.prompts_per_type, at_least)]
    rendered = [render_prompt(t.prompt, template, t.system) for t in tasks]
    notes = sorted({f"{content_type}: {r.note}" for r in rendered if r.note})
    return tuple(r.text for r in rendered), notes


def _cell(
    config: SweepConfig,
    prompts: tuple[str, ...],
    content_type: str,
    temperature: float,
    setting: Setting,
    clients: int = 1,
) -> Cell:

    return Cell(
        target=config.target,
        draft=config.draft if uses_draft_file(setting.method) else "",
        k=setting.k,
        prompts=prompts,
        temperature=temperature,
        p_min=setting.p_min,
        n_predict=config.n_predict,
        repeats=config.repeats,
        threads=config.threads,
        gpu_layers=config.gpu_layers,
        seed=config.seed,
        ctx_size=config.ctx_size,
        timeout_s=config.timeout_s,
        content_type=content_type,
        method=setting.method,
        options=setting.options,
        via=config.via,
        clients=clients,
        parallel=config.parallel or 0,
    )


def planned_settings(config: SweepConfig) -> list[Setting]:
    """Every setting measured per content type and temperature before any extension of K."""
    if config.settings is not None:
        return list(config.settings)
    return [s for m in config.methods for s in settings_for(m, list(config.ks), list(config.draft_p_mins))]


def run_sweep(
    config: SweepConfig,
    *,
    template: ChatTemplate | None = None,
    measure: Callable[..., CellResult] = measure_cell,
    progress: Progress | None = None,
    should_cancel: Cancel | None = None,
) -> SweepResult:
    """Measure every (content type, temperature) over the K grid; stop early on cancel."""
    start = time.monotonic()
    try:
        template = template if template is not None else read_chat_template(config.target)
    except (OSError, ValueError) as exc:
        return SweepResult(
            config, "failed", f"cannot read the target's header: {exc}", (), (), (), time.monotonic() - start
        )
    try:
        if config.via == "server":
            plain_caps = spec_caps = None
            server_caps = binaries.capabilities(binaries.find_binary(binaries.SERVER))
        else:
            plain_caps = binaries.capabilities(binaries.find_binary(binaries.COMPLETION))
            spec_caps = binaries.capabilities(binaries.find_binary(binaries.SPECULATIVE))
            server_caps = None
    except (binaries.LlamaCppNotFound, binaries.LlamaCppError) as exc:
        return SweepResult(config, "failed", str(exc), (), (), (), time.monotonic() - start)
    types = config.content_types or config.task_set.content_types
    groups = [(ct, t) for ct in types for t in config.temperatures]
    planned = planned_settings(config)
    base, *more_clients = sorted(set(config.clients)) or [1]
    expected = len(groups) * (len(planned) + 2 * len(more_clients))
    cells: list[CellResult] = []
    recs: list[Recommendation] = []
    notes: list[str] = []
    status, error = "ok", None
    shown = [0.0]
    crashes = CrashDiagnosis()

    def cell_progress(done: int) -> Progress:
        """The run's progress while its cell number ``done`` is measured."""

        def sub(fraction: float, message: str) -> None:
            if progress is not None:
                # an extension adds a cell to the estimate; never let the bar move back
                # ``expected`` is read late on purpose: an extension raises it; 1.0 only at the end
                shown[0] = max(shown[0], min(0.99, (done + fraction) / expected))
                progress(shown[0], message)

        return sub

    def measure_one(cell: Cell) -> CellResult:
        result = measure(
            cell,
            plain_caps=plain_caps,
            spec_caps=spec_caps,
            server_caps=server_caps,
            progress=cell_progress(len(cells)),
            should_cancel=should_cancel,
        )
        cells.append(result)
        return result

    for content_type, temperature in groups:
        prompts, group_notes = _prompts(config, template, content_type, max(config.clients))
        notes += [n for n in group_notes if n not in notes]
        if not prompts:
            recs.append(recommend(content_type, temperature, [], base, config.parallel))
            continue
        group: list[CellResult] = []
        chosen = (config.settings_by_type or {}).get(content_type)
        if chosen is not None:
            expected += len(chosen) - len(planned)
        queue = list(chosen if chosen is not None else planned)
        while queue:
            setting = queue.pop(0)
            result = measure_one(_cell(config, prompts, content_type, temperature, setting, base))
            group.append(result)
            if result.status == "cancelled":
                status, error = "cancelled", "cancelled"
                break
            if (explanation := crashes.build_at_fault(result)) is not None:
                # every other setting would die the same way: one explanation, and the run stops
                status, error = "failed", explanation
                break
            if (
                config.extend
                and chosen is None
                and setting.method not in NGRAM_SWEEP
                and setting.method != "ngram-cache"
                and not any(q.method == setting.method and q.p_min == setting.p_min for q in queue)
            ):
                # the last K of this method and p-min: go on upward while the largest K is the fastest
                same = [c for c in group if c.cell.method == setting.method and c.cell.p_min == setting.p_min]
                nk = next_k({c.cell.k: cell_speed(c) for c in same}, config.grid)
                if nk is not None:
                    queue.insert(0, Setting(setting.method, nk, setting.p_min, setting.options))
                    expected += 1
        recs.append(recommend(content_type, temperature, group, base, config.parallel))
        if status != "ok":
            break
        # Larger concurrency: the best two settings of this type measured again (the best K may shrink there)
        ranked = sorted((c for c in group if cell_speed(c) is not None), key=lambda c: -(c.speedup or 0.0))
        top = [c.cell.setting for c in ranked[:2]]
        for clients in more_clients:
            at: list[CellResult] = []
            for setting in top:
                result = measure_one(_cell(config, prompts, content_type, temperature, setting, clients))
                at.append(result)
                if result.status == "cancelled":
                    status, error = "cancelled", "cancelled"
                    break
            recs.append(recommend(content_type, temperature, at, clients, config.parallel))
            if status != "ok":
                break
        if status != "ok":
            break
    if status == "ok" and cells and all(c.status != "ok" for c in cells):
        status, error = "failed", cells[0].error
    by_type: dict[str, list[CellResult]] = {}
    for c in cells:
        by_type.setdefault(c.cell.content_type, []).append(c)
    if progress is not None and status == "ok":
        progress(1.0, "sweep finished")
    return SweepResult(
        config, status, error, tuple(cells), tuple(recs), tuple(notes), time.monotonic() - start, by_type
    )
