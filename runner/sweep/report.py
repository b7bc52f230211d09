"""The markdown report of a benchmark run: settings, hardware, build, every cell, the recommendations."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspector.spec_flags import alone_label
from registry.formatting import duration
from registry.results.deploy import Deployment
from runner.llama import binaries
from runner.measure.cli import BUSY_SHARE, CellResult
from runner.methods import nothing_drafted
from runner.sweep.sweep import NO_DRAFT, Recommendation, SweepConfig, SweepResult


def _f(x: float | None, fmt: str = "{:.1f}") -> str:
    return "–" if x is None else fmt.format(x)


def _spread(s: Any) -> str:
    if s is None:
        return "–"
    return f"{s.median:.1f} ({s.min:.1f}–{s.max:.1f})" if s.n > 1 else f"{s.median:.1f}"


def _identity(c: CellResult) -> str:
    if c.identical is None:
        return "–"
    if c.identical:
        return "yes"
    return f"no (char {c.first_difference})"


def _row(c: CellResult) -> str:
    speed = _f(c.speedup, "{:.2f}x") if c.speculation_ran else "–"
    spec = _spread(c.spec)
    if c.status == "ok" and not c.speculation_ran:  # the target alone: one speed, the plain run's, and why
        spec, speed = "–", f"{nothing_drafted(c.cell.method, c.cell.p_min)}; plain t/s is the target's own speed"
    status = c.status if c.status == "ok" else f"{c.status}: {c.error}"
    return (
        f"| {c.cell.k} | {c.cell.temperature:g} | {_spread(c.plain)} | {spec} | {speed} | "
        f"{_f(c.acceptance_rate and 100 * c.acceptance_rate, '{:.1f}%')} | "
        f"{_f(c.mean_accepted_per_verification, '{:.2f}')} | {_identity(c)} | {status} |"
    )


def _hardware_lines(hw: dict[str, Any]) -> list[str]:
    ram = hw.get("ram_bytes")
    lines = [
        f"- Class: `{hw.get('hardware_class', '?')}`",
        f"- llama.cpp instruction set: `{hw.get('llama_isa') or 'unknown'}`",
        f"- CPU: {hw.get('cpu_model', '?')}, {hw.get('cpu_cores', '?')} usable cores",
        f"- RAM: {ram / 2**30:.1f} GiB" if ram else "- RAM: unknown",
    ]
    for g in hw.get("gpus") or []:
        mem = g.get("memory_bytes")
        lines.append(f"- GPU: {g.get('name')}" + (f", {mem / 2**30:.0f} GiB" if mem else ""))
    return lines


def _prediction_lines(pred: dict[str, Any]) -> list[str]:
    """What was predicted first (runner.predict.runs) and what that spared the benchmark."""
    took = sum(pred["seconds"].values())
    saved = pred.get("saved_s")
    lines = [
        "## Predicted first",
        "",
        f"{pred['settings']} setting(s) were predicted at temperature 0 in {took:.0f} s (transcript, replay through "
        "llama.cpp's own speculative loop, and a cost model of this machine); only the best per content type were "
        "measured (`--full-sweep` measures every setting)."
        + (f" This spared about {duration(saved)} of benchmark." if saved and saved > 0 else ""),
        "",
    ]
    for t, labels in pred.get("measured", {}).items():
        lines.append(f"- {t}: measured {', '.join(f'`{x}`' for x in labels)}")
    for x in pred.get("not_predictable", []):
        lines.append(f"- {x['method']}: {x['why']}; measured in full")
    return [*lines, ""]


def markdown_report(
    result: SweepResult,
    *,
    hardware: dict[str, Any],
    build: binaries.Build,
    deployments: dict[str, Deployment] | None = None,
    prediction: dict[str, Any] | None = None,
) -> str:
    """The benchmark report in markdown: settings, hardware, build, every cell, the recommendations."""
    out = [
        *_method_lines(result.config),
        "## Hardware",
        "",
        *_hardware_lines(hardware),
        "",
        "## llama.cpp build",
        "",
        f"- {build.label}, {build.compiler} for {build.target}",
        "",
    ]
    if prediction is not None:
        out += _prediction_lines(prediction)
    if result.status != "ok":
        out += [f"**Sweep {result.status}:** {result.error}", ""]
    if result.prompt_notes:
        out += ["Prompt notes:", *[f"- {n}" for n in result.prompt_notes], ""]
    for rec in result.recommendations:
        out += _recommendation_lines(rec, result.cells)
    if deployments:
        out += _deployment_lines(result.recommendations, deployments)
    return "\n".join(out).rstrip() + "\n"


def _method_lines(cfg: SweepConfig) -> list[str]:
    """The title and how every cell was measured."""
    # no draft file: the target's draftless methods, never the target drafting for itself
    pair = f"{Path(cfg.target).name} + {Path(cfg.draft).name}" if cfg.draft else f"{Path(cfg.target).name} alone"
    return [
        f"# Speculative decoding benchmark: {pair}" + ("" if cfg.draft else f" ({alone_label(list(cfg.methods))})"),
        "",
        "## Method",
        "",
        f"Each cell runs the target alone (`llama-completion`) and with the draft (`llama-speculative-simple`), "
        f"alternating plain and speculative runs (A B A B) so that drift over time affects both sides alike. "
        f"{cfg.repeats} repeat(s) × {cfg.prompts_per_type or 'all'} prompt(s) per content type from task set "
        f"`{cfg.task_set.name}`, {cfg.n_predict} tokens, seed {cfg.seed}, context {cfg.ctx_size}"
        + (f", draft p-min {cfg.p_min:g}" if cfg.p_min is not None else "")
        + ". "
        "Speeds are llama.cpp's own generation rates, model loading excluded (plain: llama-completion's eval "
        "rate; speculative: llama-speculative-simple's decode rate, drafting included), as median with min–max "
        "in brackets; "
        "speedup = speculative median ÷ plain median on the same machine and build, shown as measured even "
        "below 1. A setting is recommended only when its gain is measurable: every speculative run faster than the "
        "plain run interleaved with it, over at least two pairs. At temperature 0 the speculative text "
        "is compared with the plain text over the plain run's length (speculation may overshoot the token "
        "limit by up to K); a difference is reported with its first character position.",
        "",
    ]


def _recommendation_lines(rec: Recommendation, all_cells: Sequence[CellResult]) -> list[str]:
    """One content type at one temperature and concurrency: its cells, the recommendation, and what to doubt."""
    cells = [
        c
        for c in all_cells
        if c.cell.content_type == rec.content_type
        and c.cell.temperature == rec.temperature
        and c.cell.clients == rec.clients
    ]
    load = (
        f", {rec.clients} concurrent clients on {rec.parallel} slots: aggregate speeds, speedup against the plain "
        "server at the same concurrency"
        if rec.clients > 1
        else ""
    )
    return [
        f"## {rec.content_type} (temperature {rec.temperature:g}{load})",
        "",
        "| K | temp | plain t/s | speculative t/s | speedup | acceptance | accepted/verification "
        "| identical | status |",
        "|---|---|---|---|---|---|---|---|---|",
        *[_row(c) for c in sorted(cells, key=lambda c: c.cell.k)],
        "",
        f"**Recommendation:** {rec.summary if rec.use_draft else NO_DRAFT} — {rec.reason}."
        + (f" **Caveat:** {rec.caveat}." if rec.caveat else ""),
        "",
        *_busy_lines(cells),
        *_divergence_lines(cells),
    ]


def _busy_lines(cells: list[CellResult]) -> list[str]:
    """A warning when other work took a share of the CPU while cells ran."""
    busy = [c for c in cells if (c.other_cpu_share or 0) > BUSY_SHARE]
    if not busy:
        return []
    worst = max(busy, key=lambda c: c.other_cpu_share or 0)  # every busy cell has a share
    return [
        f"- Warning: other work used up to {100 * (worst.other_cpu_share or 0):.0f}% of the CPU while "
        f"K={', '.join(str(c.cell.k) for c in busy)} ran; those speeds understate both sides, "
        "speculation most.",
        "",
    ]


def _divergence_lines(cells: list[CellResult]) -> list[str]:
    """Where each speculative output first differs from the plain one, and why that happens."""
    diverged = [c for c in cells if c.identical is False]
    out = []
    for c in diverged:
        d = c.divergences[0]
        out.append(
            f"- K={c.cell.k}: output differs from the plain run at character {d.position} "
            f"(prompt {d.prompt_index + 1}): plain `{d.plain_excerpt!r}` vs speculative "
            f"`{d.spec_excerpt!r}`"
        )
    if diverged:
        out += [
            "",
            "Such differences come from batch-size-dependent arithmetic in the target's "
            "verification batches, not from the draft; they are reported, not hidden.",
            "",
        ]
    return out


def _deployment_lines(recs: Sequence[Recommendation], deployments: dict[str, Deployment]) -> list[str]:
    """The deployment per content type, for the largest concurrency measured."""
    clients = max((r.clients for r in recs), default=1)
    out = ["## Deployment", "", f"For {clients} concurrent client{'s' if clients != 1 else ''}, as measured.", ""]
    for name, dep in deployments.items():
        out += [f"### {name}", "", "```sh", dep.command, "```", "", "```ini", dep.unit.rstrip(), "```", ""]
    return out
