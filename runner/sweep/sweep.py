"""Sweep speculation settings (method, K, p-min, the n-gram options) per content type and temperature, and
recommend the fastest one that beats the plain target."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from inspector.llama_flags import Capabilities
from inspector.spec_flags import NGRAM_SWEEP, Setting, chain_beats_parts, chain_parts, uses_draft_file
from registry.results.standing import MIN_PAIRS
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


def measurable_gain(c: CellResult) -> bool:
    """Speculation gained beyond the measured spread: every interleaved pair (a speculative run over the plain run
    beside it, or under load a round over its plain round) was faster, in at least MIN_PAIRS pairs. One repeat
    cannot tell 1.01x from noise (registry.results.standing, the rule the registry's headlines follow)."""
    p = c.pair_speedups
    return p is not None and p.n >= MIN_PAIRS and p.min > 1.0


def spread_text(c: CellResult) -> str:
    p = c.pair_speedups
    if p is None:
        return "no interleaved pair"
    return f"{p.n} interleaved pair{'s' if p.n != 1 else ''} from {p.min:.2f}x to {p.max:.2f}x"


def _chains_that_win(gains: list[CellResult], usable: list[CellResult]) -> tuple[list[CellResult], str | None]:
    """``gains`` without the chains that do not measurably beat their best part: a chain is recommended only when its
    slowest interleaved pair is faster than the fastest setting of one of its methods alone (its median), since a
    chain's cost (the draft model takes in every round) is easy to mistake for noise."""
    kept, dropped = [], []
    for c in gains:
        alone = [u.speedup or 0.0 for u in usable if u.cell.method in chain_parts(c.cell.method)]
        slowest = c.pair_speedups.min if c.pair_speedups is not None else None
        if chain_beats_parts(c.cell.method, slowest, alone):
            kept.append(c)
        else:
            dropped.append(f"{c.cell.setting.label} ({c.speedup:.2f}x) did not measurably beat its parts alone "
                           f"(best {max(alone):.2f}x)")  # fmt: skip
    return kept, ("; ".join(dropped) if dropped else None)


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
    gains, chain_note = _chains_that_win(gains, usable)
    if gains:
        best = max(gains, key=lambda c: c.speedup or 0.0)
    s = best.cell.setting
    if chain_note:
        caveat = f"{caveat}; {chain_note}" if caveat else chain_note
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


@dataclass(frozen=True)
class _Caps:
    """What the llama.cpp binaries a cell runs can do: llama-server's (via server), or the two CLI tools'."""

    plain: Capabilities | None = None
    spec: Capabilities | None = None
    server: Capabilities | None = None


def _read_caps(config: SweepConfig) -> _Caps:
    """Raises LlamaCppNotFound or LlamaCppError when a binary the sweep needs is missing or broken."""
    if config.via == "server":
        return _Caps(server=binaries.capabilities(binaries.find_binary(binaries.SERVER)))
    plain = binaries.capabilities(binaries.find_binary(binaries.COMPLETION))
    return _Caps(plain=plain, spec=binaries.capabilities(binaries.find_binary(binaries.SPECULATIVE)))


@dataclass(frozen=True)
class _Group:
    """One content type at one temperature, with its rendered prompts."""

    content_type: str
    temperature: float
    prompts: tuple[str, ...]

    def cell(self, config: SweepConfig, setting: Setting, clients: int) -> Cell:
        return _cell(config, self.prompts, self.content_type, self.temperature, setting, clients)


@dataclass
class _SweepState:
    """A sweep under way: what it measured and recommended, whether it goes on, and its progress bar."""

    config: SweepConfig
    caps: _Caps
    measure: Callable[..., CellResult]
    progress: Progress | None
    should_cancel: Cancel | None
    expected: int  # cells the bar counts to: a predicted plan or an extension of K changes it during the run
    shown: float = 0.0  # where the bar stands: it never moves back
    cells: list[CellResult] = field(default_factory=list)
    recs: list[Recommendation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    status: str = "ok"  # ok, failed, cancelled: anything but ok stops the run
    error: str | None = None
    crashes: CrashDiagnosis = field(default_factory=CrashDiagnosis)

    def stop(self, status: str, error: str | None) -> None:
        self.status, self.error = status, error

    def report(self, done: int, fraction: float, message: str) -> None:
        """The run's progress while its cell number ``done`` is ``fraction`` measured."""
        if self.progress is not None:
            # an extension adds a cell to the estimate (``expected`` as it stands when the cell reports); never let
            # the bar move back; 1.0 only at the end
            self.shown = max(self.shown, min(0.99, (done + fraction) / self.expected))
            self.progress(self.shown, message)

    def measure_one(self, cell: Cell) -> CellResult:
        result = self.measure(
            cell,
            plain_caps=self.caps.plain,
            spec_caps=self.caps.spec,
            server_caps=self.caps.server,
            progress=functools.partial(self.report, len(self.cells)),
            should_cancel=self.should_cancel,
        )
        self.cells.append(result)
        return result


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
        caps = _read_caps(config)
    except (binaries.LlamaCppNotFound, binaries.LlamaCppError) as exc:
        return SweepResult(config, "failed", str(exc), (), (), (), time.monotonic() - start)
    types = config.content_types or config.task_set.content_types
    groups = [(ct, t) for ct in types for t in config.temperatures]
    planned = planned_settings(config)
    base, *more_clients = sorted(set(config.clients)) or [1]
    expected = len(groups) * (len(planned) + 2 * len(more_clients))
    state = _SweepState(config, caps, measure, progress, should_cancel, expected)
    for content_type, temperature in groups:
        prompts, group_notes = _prompts(config, template, content_type, max(config.clients))
        state.notes += [n for n in group_notes if n not in state.notes]
        if not prompts:
            state.recs.append(recommend(content_type, temperature, [], base, config.parallel))
            continue
        group = _Group(content_type, temperature, prompts)
        measured = _sweep_settings(state, group, planned, base)
        state.recs.append(recommend(content_type, temperature, measured, base, config.parallel))
        if state.status == "ok":
            _sweep_more_clients(state, group, measured, more_clients)
        if state.status != "ok":
            break
    return _finish(state, start)


def _sweep_settings(state: _SweepState, group: _Group, planned: list[Setting], clients: int) -> list[CellResult]:
    """The group's settings at the smallest concurrency: the predicted ones for its type where there are, else the
    plan, each K extended upward while the largest is the fastest. Stops the run on cancel or a broken build."""
    chosen = (state.config.settings_by_type or {}).get(group.content_type)
    if chosen is not None:
        state.expected += len(chosen) - len(planned)
    queue = list(chosen if chosen is not None else planned)
    measured: list[CellResult] = []
    while queue:
        setting = queue.pop(0)
        result = state.measure_one(group.cell(state.config, setting, clients))
        measured.append(result)
        if result.status == "cancelled":
            state.stop("cancelled", "cancelled")
            break
        if (explanation := state.crashes.build_at_fault(result)) is not None:
            # every other setting would die the same way: one explanation, and the run stops
            state.stop("failed", explanation)
            break
        if chosen is None and (larger := _extension(state.config, setting, queue, measured)) is not None:
            queue.insert(0, larger)
            state.expected += 1
    return measured


def _extension(
    config: SweepConfig, setting: Setting, queue: list[Setting], measured: list[CellResult]
) -> Setting | None:
    """The next K to measure after ``setting``, when it was the last K of its method and p-min in the queue."""
    if (
        not config.extend
        or setting.method in NGRAM_SWEEP
        or setting.method == "ngram-cache"
        or any(q.method == setting.method and q.p_min == setting.p_min for q in queue)
    ):
        return None
    # the last K of this method and p-min: go on upward while the largest K is the fastest
    same = [c for c in measured if c.cell.method == setting.method and c.cell.p_min == setting.p_min]
    nk = next_k({c.cell.k: cell_speed(c) for c in same}, config.grid)
    return Setting(setting.method, nk, setting.p_min, setting.options) if nk is not None else None


def _sweep_more_clients(state: _SweepState, group: _Group, measured: list[CellResult], more_clients: list[int]) -> None:
    """Larger concurrency: the best two settings of this type measured again (the best K may shrink there)."""
    ranked = sorted((c for c in measured if cell_speed(c) is not None), key=lambda c: -(c.speedup or 0.0))
    top = [c.cell.setting for c in ranked[:2]]
    for clients in more_clients:
        at: list[CellResult] = []
        for setting in top:
            result = state.measure_one(group.cell(state.config, setting, clients))
            at.append(result)
            if result.status == "cancelled":
                state.stop("cancelled", "cancelled")
                break
        state.recs.append(recommend(group.content_type, group.temperature, at, clients, state.config.parallel))
        if state.status != "ok":
            return


def _finish(state: _SweepState, start: float) -> SweepResult:
    """The run's result: failed when no cell completed; the bar at 1.0 when it ended well."""
    cells = state.cells
    if state.status == "ok" and cells and all(c.status != "ok" for c in cells):
        state.stop("failed", cells[0].error)
    by_type: dict[str, list[CellResult]] = {}
    for c in cells:
        by_type.setdefault(c.cell.content_type, []).append(c)
    if state.progress is not None and state.status == "ok":
        state.progress(1.0, "sweep finished")
    return SweepResult(
        state.config,
        state.status,
        state.error,
        tuple(cells),
        tuple(state.recs),
        tuple(state.notes),
        time.monotonic() - start,
        by_type,
    )
