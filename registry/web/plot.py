"""An inline SVG of speedup and acceptance against K, one colour per content type (drawn server-side)."""

from __future__ import annotations

from collections import defaultdict

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from registry.results.figures import Figure
from registry.web.svg import Frame, pts

FRAME = Frame(640, 300, bottom=64)
LEFT, TOP = FRAME.left, FRAME.top
COLOURS = ["#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626"]


def _series(figs: list[Figure]) -> dict[str, dict[int, Figure]]:
    """Per content type, one point per K: the best speedup when several results share a K."""
    out: dict[str, dict[int, Figure]] = defaultdict(dict)
    for f in figs:
        cur = out[f.content_type or "unspecified"].get(f.k)
        if cur is None or (f.speedup or 0) > (cur.speedup or 0):
            out[f.content_type or "unspecified"][f.k] = f
    return dict(sorted(out.items()))


def speed_acceptance_svg(figs: list[Figure], title: str) -> SafeString:
    """Every text in the picture is escaped here, so the result may be inserted as is."""
    series = _series([f for f in figs if f.speedup is not None or f.acceptance is not None])
    if not series:
        return mark_safe("")
    ks = sorted({k for points in series.values() for k in points})
    top_speed = max([1.2] + [f.speedup * 1.1 for points in series.values() for f in points.values() if f.speedup])
    fr = FRAME
    pw, ph = fr.pw, fr.ph

    def x(k: int) -> float:
        return LEFT + (pw / 2 if len(ks) == 1 else pw * ks.index(k) / (len(ks) - 1))

    def y_speed(v: float) -> float:
        return fr.y_scaled(v, top_speed)

    y_acc = fr.y_fraction
    parts = fr.start(
        title,
        top_value=top_speed,
        tick=lambda v: f"{v:.1f}×",
        left_title="speedup (solid)",
        right_title="acceptance (dashed)",
    )
    one = y_speed(1.0)
    parts.append(
        f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{one:.1f}" y2="{one:.1f}" stroke="#64748b" '
        f'stroke-dasharray="2 3"/><text x="{LEFT + 4}" y="{one - 4:.1f}" class="tick">1× = no gain</text>'
    )
    for k in ks:
        parts.append(f'<text x="{x(k):.1f}" y="{TOP + ph + 16}" text-anchor="middle" class="tick">{k}</text>')
    parts.append(
        f'<text x="{LEFT + pw / 2}" y="{TOP + ph + 32}" text-anchor="middle" class="axis">'
        "K (draft tokens per step)</text>"
    )
    for i, (ctype, points) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        ordered = [points[k] for k in ks if k in points]
        speed = [(x(f.k), y_speed(f.speedup)) for f in ordered if f.speedup is not None]
        acc = [(x(f.k), y_acc(f.acceptance)) for f in ordered if f.acceptance is not None]
        if len(speed) > 1:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts(speed)}"/>')
        if len(acc) > 1:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" stroke-dasharray="6 4" '
                f'points="{pts(acc)}"/>'
            )
        for f in ordered:
            label = escape(
                f"{ctype}, K={f.k}: "
                + (f"{f.speedup:.2f}×" if f.speedup is not None else "no speed")
                + (f", {f.acceptance:.0%} accepted" if f.acceptance is not None else "")
            )
            if f.speedup is not None:
                parts.append(
                    f'<circle cx="{x(f.k):.1f}" cy="{y_speed(f.speedup):.1f}" r="4" fill="{colour}">'
                    f"<title>{label}</title></circle>"
                )
            if f.acceptance is not None:
                parts.append(
                    f'<rect x="{x(f.k) - 3:.1f}" y="{y_acc(f.acceptance) - 3:.1f}" width="6" height="6" '
                    f'fill="#fff" stroke="{colour}"><title>{label}</title></rect>'
                )
    parts.append(fr.legend([(COLOURS[i % len(COLOURS)], ctype[:24]) for i, ctype in enumerate(series)]))
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text above went through escape()
