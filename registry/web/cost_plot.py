"""An inline SVG of a machine's cost model: the time to decode a batch of b tokens with every token's logits (what
a verify step costs) against b, one colour per model file, and each batch's time per token against one token's.

On a CPU with few cores the dashed per-token line stays near 100% (verifying K tokens costs nearly K decodes, so
only high acceptance pays); on a GPU it falls steeply (verifying is nearly free). That shape decides the best K.
"""

from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from registry.web.plot import COLOURS
from registry.web.svg import Frame, pts

FRAME = Frame(640, 300, bottom=64)


def cost_model_svg(series: dict[str, list[float]], title: str) -> SafeString:
    """``series``: model name -> seconds per batch of 1, 2, … tokens. Every text is escaped here."""
    series = {name: s for name, s in series.items() if s and s[0] > 0}
    if not series:
        return mark_safe("")
    fr = FRAME
    top_ms = max(1.0, max(1000 * x for s in series.values() for x in s) * 1.1)
    n = max(len(s) for s in series.values())

    def x(b: int) -> float:
        return fr.left + (fr.pw / 2 if n == 1 else fr.pw * (b - 1) / (n - 1))

    parts = fr.start(
        title,
        top_value=top_ms,
        tick=lambda v: f"{v:.0f} ms",
        left_title="ms per verify batch (solid)",
        right_title="per token ÷ one token (dashed)",
    )
    for b in range(1, n + 1):
        if n <= 20 or b % 2 == 1:
            parts.append(f'<text x="{x(b):.1f}" y="{fr.top + fr.ph + 16}" text-anchor="middle" class="tick">{b}</text>')
    parts.append(
        f'<text x="{fr.left + fr.pw / 2}" y="{fr.top + fr.ph + 32}" text-anchor="middle" class="axis">'
        "tokens in the batch (K + 1 when verifying K drafted tokens)</text>"
    )
    for i, (name, secs) in enumerate(sorted(series.items())):
        colour = COLOURS[i % len(COLOURS)]
        solid = [(x(b), fr.y_scaled(1000 * s, top_ms)) for b, s in enumerate(secs, 1)]
        per_token = [(x(b), fr.y_fraction(s / b / secs[0])) for b, s in enumerate(secs, 1)]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts(solid)}"/>')
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" stroke-dasharray="6 4" '
            f'points="{pts(per_token)}"/>'
        )
        for b, s in enumerate(secs, 1):
            share = 100 * s / b / secs[0]
            label = escape(f"{name}, batch {b}: {1000 * s:.1f} ms ({share:.0f}% of one token's time per token)")
            parts.append(
                f'<circle cx="{x(b):.1f}" cy="{fr.y_scaled(1000 * s, top_ms):.1f}" r="3" fill="{colour}">'
                f"<title>{label}</title></circle>"
            )
    parts.append(fr.legend([(COLOURS[i % len(COLOURS)], name[:40]) for i, name in enumerate(sorted(series))]))
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text above went through escape()
