"""Sweep the draft size K per content type and temperature, and recommend the fastest K that beats the plain target."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from . import llamacpp
from .measure import BUSY_SHARE, Cancel, Cell, CellResult, Progress, measure_cell
from .prompts import ChatTemplate, TaskSet, read_chat_template, render_prompt

GRID = (1, 2, 4, 8, 12, 16, 24)
DEFAULT_KS = (4, 8, 16)
NO_DRAFT = "run without a draft"


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
    p_min: float | None = None
    threads: int | None = None
    gpu_layers: int | None = None
    seed: int = 42
    ctx_size: int = 2048
    timeout_s: float = 600.0


@dataclass(frozen=True)
class Recommendation:
    content_type: str
    temperature: float
    k: int | None  # None: speculation did not pay off
    speedup: float | None  # of the recommended K, or the best seen when none is recommended
    acceptance_rate: float | None
    reason: str
    caveat: str | None = None  # e.g. the deciding cell ran on a busy machine

    @property
    def use_draft(self) -> bool:
        return self.k is not None

    @property
    def summary(self) -> str:
        return f"K={self.k} ({self.speedup:.2f}x)" if self.k is not None else NO_DRAFT


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


def recommend(content_type: str, temperature: float, cells: Sequence[CellResult]) -> Recommendation:
    """The fastest K whose speedup is above 1, else: run without a draft (and say why)."""
    usable = [c for c in cells if cell_speed(c) is not None]
    if not usable:
        failed = [c for c in cells if c.status != "ok"]
        if failed:
            reason = f"no K completed: {failed[0].error or failed[0].status}"
        elif cells:
            reason = "speculation never ran (the draft proposed no tokens)"
        else:
            reason = "nothing measured"
        return Recommendation(content_type, temperature, None, None, None, reason)
    best = max(usable, key=lambda c: c.speedup)
    busy = [c for c in cells if (c.other_cpu_share or 0) > BUSY_SHARE]
    caveat = None
    if busy:
        worst = max(c.other_cpu_share for c in busy)
        caveat = (f"other work used up to {100 * worst:.0f}% of the CPU during "
                  f"K={', '.join(str(c.cell.k) for c in busy)}; re-run on a quiet machine before relying on it")
    if best.speedup > 1.0:
        return Recommendation(content_type, temperature, best.cell.k, best.speedup, best.acceptance_rate,
                              f"K={best.cell.k} was fastest: {best.speedup:.2f}x the target alone", caveat)
    return Recommendation(content_type, temperature, None, best.speedup, best.acceptance_rate,
                          f"no K beat the target alone (best: K={best.cell.k} at {best.speedup:.2f}x)", caveat)


def _prompts(config: SweepConfig, template: ChatTemplate | None,
             content_type: str) -> tuple[tuple[str, ...], list[str]]:
    tasks = config.task_set.by_type(content_type)
    if config.prompts_per_type is not None:
        tasks = tasks[: config.prompts_per_type]
    rendered = [render_prompt(t.prompt, template, t.system) for t in tasks]
    notes = sorted({f"{content_type}: {r.note}" for r in rendered if r.note})
    return tuple(r.text for r in rendered), notes


def _cell(config: SweepConfig, prompts: tuple[str, ...], content_type: str, temperature: float, k: int) -> Cell:
    return Cell(
        target=config.target, draft=config.draft, k=k, prompts=prompts, temperature=temperature,
        p_min=config.p_min, n_predict=config.n_predict, repeats=config.repeats, threads=config.threads,
        gpu_layers=config.gpu_layers, seed=config.seed, ctx_size=config.ctx_size, timeout_s=config.timeout_s,
        content_type=content_type,
    )


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
        return SweepResult(config, "failed", f"cannot read the target's header: {exc}", (), (), (),
                           time.monotonic() - start)
    try:
        plain_caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.COMPLETION))
        spec_caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.SPECULATIVE))
    except (llamacpp.LlamaCppNotFound, llamacpp.LlamaCppError) as exc:
        return SweepResult(config, "failed", str(exc), (), (), (), time.monotonic() - start)
    types = config.content_types or config.task_set.content_types
    groups = [(ct, t) for ct in types for t in config.temperatures]
    expected = len(groups) * len(config.ks)
    cells: list[CellResult] = []
    recs: list[Recommendation] = []
    notes: list[str] = []
    status, error = "ok", None
    shown = [0.0]
    for content_type, temperature in groups:
        prompts, group_notes = _prompts(config, template, content_type)
        notes += [n for n in group_notes if n not in notes]
        if not prompts:
            recs.append(recommend(content_type, temperature, []))
            continue
        group: list[CellResult] = []
        queue = list(config.ks)
        while queue:
            k = queue.pop(0)
            done = len(cells)

            def sub(fraction: float, message: str, done: int = done) -> None:
                if progress is not None:
                    # an extension adds a cell to the estimate; never let the bar move back
                    # ``expected`` is read late on purpose: an extension raises it; 1.0 only at the end
                    shown[0] = max(shown[0], min(0.99, (done + fraction) / expected))  # noqa: B023
                    progress(shown[0], message)

            result = measure(_cell(config, prompts, content_type, temperature, k), plain_caps=plain_caps,
                             spec_caps=spec_caps, progress=sub, should_cancel=should_cancel)
            cells.append(result)
            group.append(result)
            if result.status == "cancelled":
                status, error = "cancelled", "cancelled"
                break
            if not queue and config.extend:
                nk = next_k({c.cell.k: cell_speed(c) for c in group}, config.grid)
                if nk is not None:
                    queue.append(nk)
                    expected += 1
        recs.append(recommend(content_type, temperature, group))
        if status == "cancelled":
            break
    if status == "ok" and cells and all(c.status != "ok" for c in cells):
        status, error = "failed", cells[0].error
    by_type: dict[str, list[CellResult]] = {}
    for c in cells:
        by_type.setdefault(c.cell.content_type, []).append(c)
    if progress is not None and status == "ok":
        progress(1.0, "sweep finished")
    return SweepResult(config, status, error, tuple(cells), tuple(recs), tuple(notes),
                       time.monotonic() - start, by_type)
