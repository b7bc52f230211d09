"""An inline SVG of a deployment's observed tokens/s and acceptance over time (drawn server-side, like
registry.web.plot's K plot), with failed scrapes as gaps and the measured figures as reference lines."""

from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from registry.team.telemetry import PUBLIC_GAP, Point
from registry.web.svg import Frame, pts

FRAME = Frame(640, 280)
LEFT, TOP = FRAME.left, FRAME.top
SPEED, ACC, GAP, MEASURED = "#2563eb", "#059669", "#dc2626", "#64748b"


def observed_svg(
    points: list[Point],
    *,
    measured_tps: float | None = None,
    measured_acceptance: float | None = None,
    title: str = "Observed in production",
) -> SafeString:
    """Solid: tokens/s per scrape interval; dashed: acceptance; red ticks: gaps; grey: measured."""
    if not points:
        return mark_safe("")
    t0, t1 = points[0].at.timestamp(), points[-1].at.timestamp()
    span = max(t1 - t0, 1.0)
    speeds = [p.tokens_per_second for p in points if p.tokens_per_second is not None]
    top = max([1.0] + [s * 1.1 for s in speeds] + ([measured_tps * 1.1] if measured_tps else []))
    pw, ph = FRAME.pw, FRAME.ph

    def x(p: Point) -> float:
        return LEFT + (pw / 2 if t1 == t0 else pw * (p.at.timestamp() - t0) / span)

    def y_speed(v: float) -> float:
        return FRAME.y_scaled(v, top)

    y_acc = FRAME.y_fraction
    parts = FRAME.start(
        title,
        top_value=top,
        tick=lambda v: f"{v:.0f}",
        left_title="tokens/s (solid)",
        right_title="acceptance (dashed)",
    )
    for at, frac in ((points[0].at, 0.0), (points[-1].at, 1.0)):
        parts.append(
            f'<text x="{LEFT + pw * frac:.1f}" y="{TOP + ph + 16}" text-anchor="{"start" if frac == 0 else "end"}" '
            f'class="tick">{escape(at.strftime("%Y-%m-%d %H:%M"))} UTC</text>'
        )
    if measured_tps:
        yy = y_speed(measured_tps)
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="{MEASURED}" '
            f'stroke-dasharray="2 3"><title>measured: {measured_tps:.1f} tokens/s</title></line>'
        )
    if measured_acceptance is not None:
        yy = y_acc(measured_acceptance)
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="{MEASURED}" '
            f'stroke-dasharray="8 3"><title>measured: {measured_acceptance:.0%} accepted</title></line>'
        )
    for run in _runs(points, "tokens_per_second"):
        if len(run) > 1:
            line = pts([(x(p), y_speed(p.tokens_per_second)) for p in run if p.tokens_per_second is not None])
            parts.append(f'<polyline fill="none" stroke="{SPEED}" stroke-width="2" points="{line}"/>')
    for run in _runs(points, "acceptance"):
        if len(run) > 1:
            line = pts([(x(p), y_acc(p.acceptance)) for p in run if p.acceptance is not None])
            parts.append(
                f'<polyline fill="none" stroke="{ACC}" stroke-width="1.5" stroke-dasharray="6 4" points="{line}"/>'
            )
    for p in points:
        when = p.at.strftime("%Y-%m-%d %H:%M:%S")
        if p.gap:
            parts.append(
                f'<line x1="{x(p):.1f}" x2="{x(p):.1f}" y1="{TOP + ph - 10}" y2="{TOP + ph}" stroke="{GAP}" '
                f'stroke-width="2"><title>'
                f"{escape(when + ' UTC: ' + _gap_label(p.gap))}</title></line>"
            )
            continue
        if p.reset:
            parts.append(
                f'<line x1="{x(p):.1f}" x2="{x(p):.1f}" y1="{TOP}" y2="{TOP + ph}" stroke="{MEASURED}" '
                f'stroke-dasharray="1 3"><title>{escape(when)} UTC: server restarted (counters reset)</title></line>'
            )
        label = escape(
            f"{when} UTC: "
            + (f"{p.tokens_per_second:.1f} tokens/s" if p.tokens_per_second is not None else "no generation")
            + (f", {p.acceptance:.0%} accepted" if p.acceptance is not None else "")
        )
        if p.tokens_per_second is not None:
            parts.append(
                f'<circle cx="{x(p):.1f}" cy="{y_speed(p.tokens_per_second):.1f}" r="3.5" fill="{SPEED}">'
                f"<title>{label}</title></circle>"
            )
        if p.acceptance is not None:
            parts.append(
                f'<rect x="{x(p) - 3:.1f}" y="{y_acc(p.acceptance) - 3:.1f}" width="6" height="6" fill="#fff" '
                f'stroke="{ACC}"><title>{label}</title></rect>'
            )
    legend = [(SPEED, "t/s observed"), (ACC, "acceptance observed"), (GAP, "gap")]
    if measured_tps or measured_acceptance is not None:
        legend.append((MEASURED, "measured (runner)"))
    parts.append(FRAME.legend(legend))
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text above went through escape()


def _gap_label(gap: str) -> str:
    # The reason (staff's plots) reads as a failed scrape; everyone else's says only that it was unavailable.
    return gap if gap == PUBLIC_GAP else "scrape failed: " + gap


def _runs(points: list[Point], attr: str) -> list[list[Point]]:
    """Stretches of points with a value, broken at gaps so a line never bridges a failed scrape."""
    out: list[list[Point]] = [[]]
    for p in points:
        if p.gap:
            out.append([])
        elif getattr(p, attr) is not None:
            out[-1].append(p)
    return [r for r in out if r]
