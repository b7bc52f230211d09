"""The frame every server-drawn chart shares: an escaped title, the plot area, five grid lines with a scaled
axis on the left and a 0-100% axis on the right, the two axis titles, the legend, and polyline points.

Hand-written rather than a plotting library: the charts are a few dozen SVG elements drawn inside a page
request, without JavaScript (CSP) or a dependency that renders images.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.utils.html import escape


@dataclass(frozen=True)
class Frame:
    w: int
    h: int
    left: int = 56
    right: int = 56
    top: int = 20
    bottom: int = 56

    @property
    def pw(self) -> int:
        return self.w - self.left - self.right

    @property
    def ph(self) -> int:
        return self.h - self.top - self.bottom

    def y_scaled(self, v: float, top_value: float) -> float:
        """The left axis: 0 at the bottom, ``top_value`` at the top."""
        return self.top + self.ph * (1 - v / top_value)

    def y_fraction(self, v: float) -> float:
        """The right axis: a fraction (acceptance), 0% at the bottom, 100% at the top."""
        return self.top + self.ph * (1 - min(max(v, 0.0), 1.0))

    def start(
        self, title: str, *, top_value: float, tick: Callable[[float], str], left_title: str, right_title: str
    ) -> list[str]:
        """The opening parts of the picture: every text escaped, so the caller may join and mark it safe."""
        left, top, pw, ph = self.left, self.top, self.pw, self.ph
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.w} {self.h}" class="plot" role="img" '
            f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
            f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fff" stroke="#cbd5e1"/>',
        ]
        for i in range(5):
            v = top_value * i / 4
            yy = self.y_scaled(v, top_value)
            parts.append(
                f'<line x1="{left}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eef2f7"/>'
                f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end" class="tick">{escape(tick(v))}</text>'
                f'<text x="{left + pw + 6}" y="{self.y_fraction(i / 4) + 4:.1f}" class="tick">{i * 25}%</text>'
            )
        mid = top + ph / 2
        parts.append(
            f'<text x="14" y="{mid}" transform="rotate(-90 14 {mid})" text-anchor="middle" class="axis">'
            f"{escape(left_title)}</text>"
            f'<text x="{self.w - 10}" y="{mid}" transform="rotate(90 {self.w - 10} {mid})" '
            f'text-anchor="middle" class="axis">{escape(right_title)}</text>'
        )
        return parts

    def legend(self, entries: list[tuple[str, str]]) -> str:
        """A row of (colour, text) keys along the bottom edge, each text escaped; shorten long texts first."""
        out, x = [], float(self.left)
        for colour, text in entries:
            out.append(
                f'<rect x="{x:g}" y="{self.h - 18}" width="12" height="12" fill="{colour}"/>'
                f'<text x="{x + 16:g}" y="{self.h - 8}" class="legend">{escape(text)}</text>'
            )
            x += 28 + 7 * len(text)
        return "".join(out)


def pts(points: list[tuple[float, float]]) -> str:
    """A polyline's ``points`` attribute."""
    return " ".join(f"{a:.1f},{b:.1f}" for a, b in points)
