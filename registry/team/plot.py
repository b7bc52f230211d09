"""An inline SVG of a deployment's observed tokens/s and acceptance over time (drawn server-side, like
registry.web.plot's K plot), with failed scrapes as gaps and the measured figures as reference lines."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from registry.team.telemetry import PUBLIC_GAP, Point
from registry.web.svg import Frame, pts

FRAME = Frame(640, 280)
LEFT, TOP = FRAME.left, FRAME.top
SPEED, ACC, GAP, MEASURED = "#2563eb", "#059669", "#dc2626", "#64748b"


@dataclass(frozen=True)
class _Scale:
    """Where a point and a value land: time across, tokens/s (up to ``top``) and acceptance up."""

    t0: float
    t1: float
    top: float

    def x(self, p: Point) -> float:
        pw = FRAME.pw
        return LEFT + (
            pw / 2 if self.t1 == self.t0 else pw * (p.at.timestamp() - self.t0) / max(self.t1 - self.t0, 1.0)
        )

    def y_speed(self, v: float) -> float:
        return FRAME.y_scaled(v, self.top)

    def y_acc(self, v: float) -> float:
        return FRAME.y_fraction(v)


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
    speeds = [p.tokens_per_second for p in points if p.tokens_per_second is not None]
    top = max([1.0] + [s * 1.1 for s in speeds] + ([measured_tps * 1.1] if measured_tps else []))
    s = _Scale(points[0].at.timestamp(), points[-1].at.timestamp(), top)
    parts = FRAME.start(
        title,
        top_value=top,
        tick=lambda v: f"{v:.0f}",
        left_title="tokens/s (solid)",
        right_title="acceptance (dashed)",
    )
    pw, ph = FRAME.pw, FRAME.ph
    for at, frac in ((points[0].at, 0.0), (points[-1].at, 1.0)):
        parts.append(
            f'<text x="{LEFT + pw * frac:.1f}" y="{TOP + ph + 16}" text-anchor="{"start" if frac == 0 else "end"}" '
            f'class="tick">{escape(at.strftime("%Y-%m-%d %H:%M"))} UTC</text>'
        )
    parts += _measured_lines(s, measured_tps, measured_acceptance)
    parts += _observed_lines(s, points)
    for p in points:
        parts += _point_marks(s, p)
    legend = [(SPEED, "t/s observed"), (ACC, "acceptance observed"), (GAP, "gap")]
    if measured_tps or measured_acceptance is not None:
        legend.append((MEASURED, "measured (runner)"))
    parts.append(FRAME.legend(legend))
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text went through escape()


def _measured_lines(s: _Scale, measured_tps: float | None, measured_acceptance: float | None) -> list[str]:
    """The measured figures as grey reference lines across the plot."""
    parts: list[str] = []
    pw = FRAME.pw
    if measured_tps:
        yy = s.y_speed(measured_tps)
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="{MEASURED}" '
            f'stroke-dasharray="2 3"><title>measured: {measured_tps:.1f} tokens/s</title></line>'
        )
    if measured_acceptance is not None:
        yy = s.y_acc(measured_acceptance)
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="{MEASURED}" '
            f'stroke-dasharray="8 3"><title>measured: {measured_acceptance:.0%} accepted</title></line>'
        )
    return parts


def _observed_lines(s: _Scale, points: list[Point]) -> list[str]:
    """Tokens/s (solid) and acceptance (dashed), broken at every gap."""
    parts: list[str] = []
    for run in _runs(points, "tokens_per_second"):
        if len(run) > 1:
            line = pts([(s.x(p), s.y_speed(p.tokens_per_second)) for p in run if p.tokens_per_second is not None])
            parts.append(f'<polyline fill="none" stroke="{SPEED}" stroke-width="2" points="{line}"/>')
    for run in _runs(points, "acceptance"):
        if len(run) > 1:
            line = pts([(s.x(p), s.y_acc(p.acceptance)) for p in run if p.acceptance is not None])
            parts.append(
                f'<polyline fill="none" stroke="{ACC}" stroke-width="1.5" stroke-dasharray="6 4" points="{line}"/>'
            )
    return parts


def _point_marks(s: _Scale, p: Point) -> list[str]:
    """One scrape: a red tick for a gap; else a restart line where counters reset, and its two figures' marks."""
    ph = FRAME.ph
    x = s.x(p)
    when = p.at.strftime("%Y-%m-%d %H:%M:%S")
    if p.gap:
        return [
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP + ph - 10}" y2="{TOP + ph}" stroke="{GAP}" '
            f'stroke-width="2"><title>'
            f"{escape(when + ' UTC: ' + _gap_label(p.gap))}</title></line>"
        ]
    parts: list[str] = []
    if p.reset:
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{TOP + ph}" stroke="{MEASURED}" '
            f'stroke-dasharray="1 3"><title>{escape(when)} UTC: server restarted (counters reset)</title></line>'
        )
    label = escape(
        f"{when} UTC: "
        + (f"{p.tokens_per_second:.1f} tokens/s" if p.tokens_per_second is not None else "no generation")
        + (f", {p.acceptance:.0%} accepted" if p.acceptance is not None else "")
    )
    if p.tokens_per_second is not None:
        parts.append(
            f'<circle cx="{x:.1f}" cy="{s.y_speed(p.tokens_per_second):.1f}" r="3.5" fill="{SPEED}">'
            f"<title>{label}</title></circle>"
        )
    if p.acceptance is not None:
        parts.append(
            f'<rect x="{x - 3:.1f}" y="{s.y_acc(p.acceptance) - 3:.1f}" width="6" height="6" fill="#fff" '
            f'stroke="{ACC}"><title>{label}</title></rect>'
        )
    return parts


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
