"""An inline SVG of speedup and acceptance against K, one colour per content type (drawn server-side)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from inspector.spec_flags import uses_k
from registry.models import StabilityResult
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


def _no_gain(top_speed: float) -> str:
    """The dotted line at 1× (speculation neither helps nor hurts) on a speedup axis reaching ``top_speed``."""
    one = FRAME.y_scaled(1.0, top_speed)
    return (
        f'<line x1="{LEFT}" x2="{LEFT + FRAME.pw}" y1="{one:.1f}" y2="{one:.1f}" stroke="#64748b" '
        f'stroke-dasharray="2 3"/><text x="{LEFT + 4}" y="{one - 4:.1f}" class="tick">1× = no gain</text>'
    )


def _x_axis(ticks: list[tuple[float, str]], title: str) -> str:
    """Tick labels at their x positions and the axis title under them (texts escaped here)."""
    base = TOP + FRAME.ph
    out = [
        f'<text x="{x:.1f}" y="{base + 16}" text-anchor="middle" class="tick">{escape(label)}</text>'
        for x, label in ticks
    ]
    out.append(
        f'<text x="{LEFT + FRAME.pw / 2}" y="{base + 32}" text-anchor="middle" class="axis">{escape(title)}</text>'
    )
    return "".join(out)


def speed_acceptance_svg(figs: list[Figure], title: str) -> SafeString:
    """Speedup and acceptance against K, one line per content type: of the methods K sizes (an n-gram method's own
    draft length is another axis, listed in the figures table)."""
    series = _series([f for f in figs if (f.speedup is not None or f.acceptance is not None) and uses_k(f.method)])
    return _lines_svg(series, title, "K (draft tokens per step)", lambda k: f"K={k}", legend_chars=24)


def clients_svg(figs: list[Figure], title: str) -> SafeString:
    """Speedup and acceptance against concurrent clients, one line per content type and setting (measured under
    load)."""
    series: dict[str, dict[int, Figure]] = defaultdict(dict)
    for f in figs:
        if f.speedup is None:
            continue
        key = f"{f.content_type or 'unspecified'} {f.obj.setting_label if f.obj is not None else f'K={f.k}'}"
        cur = series[key].get(f.clients)
        if cur is None or (f.speedup or 0) > (cur.speedup or 0):
            series[key][f.clients] = f
    # only settings measured under load
    under_load = {k: v for k, v in sorted(series.items()) if any(c > 1 for c in v)}
    return _lines_svg(
        under_load,
        title,
        "concurrent clients (speedup against the plain server at the same concurrency)",
        lambda c: f"{c} client{'s' if c != 1 else ''}",
        legend_chars=32,
    )


def _lines_svg(
    series: dict[str, dict[int, Figure]],
    title: str,
    axis: str,
    point: Callable[[int], str],
    *,
    legend_chars: int,
) -> SafeString:
    """Speedup (solid, left axis) and acceptance (dashed, right axis) of named series of figures against the points
    of a categorical x axis (K, clients). Every text in the picture is escaped here, so the result may be inserted
    as is."""
    if not series:
        return mark_safe("")
    xs = sorted({k for points in series.values() for k in points})
    top_speed = max([1.2] + [f.speedup * 1.1 for points in series.values() for f in points.values() if f.speedup])
    fr = FRAME
    pw = fr.pw

    def x(k: int) -> float:
        return LEFT + (pw / 2 if len(xs) == 1 else pw * xs.index(k) / (len(xs) - 1))

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
    parts.append(_no_gain(top_speed))
    parts.append(_x_axis([(x(k), str(k)) for k in xs], axis))
    for i, (name, points) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        ordered = [(k, points[k]) for k in xs if k in points]
        speed = [(x(k), y_speed(f.speedup)) for k, f in ordered if f.speedup is not None]
        acc = [(x(k), y_acc(f.acceptance)) for k, f in ordered if f.acceptance is not None]
        if len(speed) > 1:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts(speed)}"/>')
        if len(acc) > 1:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" stroke-dasharray="6 4" '
                f'points="{pts(acc)}"/>'
            )
        for k, f in ordered:
            label = escape(
                f"{name}, {point(k)}: "
                + (f"{f.speedup:.2f}×" if f.speedup is not None else "no speed")
                + (f", {f.acceptance:.0%} accepted" if f.acceptance is not None else "")
            )
            if f.speedup is not None:
                parts.append(
                    f'<circle cx="{x(k):.1f}" cy="{y_speed(f.speedup):.1f}" r="4" fill="{colour}">'
                    f"<title>{label}</title></circle>"
                )
            if f.acceptance is not None:
                parts.append(
                    f'<rect x="{x(k) - 3:.1f}" y="{y_acc(f.acceptance) - 3:.1f}" width="6" height="6" '
                    f'fill="#fff" stroke="{colour}"><title>{label}</title></rect>'
                )
    parts.append(fr.legend([(COLOURS[i % len(COLOURS)], name[:legend_chars]) for i, name in enumerate(series)]))
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text above went through escape()


def soak_svg(intervals: list[dict], title: str) -> SafeString:
    """A soak over time: aggregate tokens per second (solid) and acceptance (dashed) per interval."""
    points = [iv for iv in intervals if isinstance(iv, dict) and isinstance(iv.get("t"), int | float)]
    if not points:
        return mark_safe("")
    fr = FRAME
    end = max(float(iv["t"]) for iv in points) or 1.0
    top = max([1.0] + [float(iv.get("tokens_per_second") or 0) * 1.15 for iv in points])

    def x(t: float) -> float:
        return LEFT + fr.pw * float(t) / end

    parts = fr.start(
        title,
        top_value=top,
        tick=lambda v: f"{v:.0f}",
        left_title="tokens/s, all clients (solid)",
        right_title="acceptance (dashed)",
    )
    ticks = [end * i / 4 for i in range(5)]
    parts.append(
        _x_axis([(x(t), f"{t / 60:.0f} min" if end >= 300 else f"{t:.0f} s") for t in ticks], "time into the soak")
    )
    speed = [(x(iv["t"]), fr.y_scaled(float(iv.get("tokens_per_second") or 0), top)) for iv in points]
    acc = [(x(iv["t"]), fr.y_fraction(float(iv["acceptance"]))) for iv in points if iv.get("acceptance") is not None]
    colour = COLOURS[0]
    if len(speed) > 1:
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts(speed)}"/>')
    if len(acc) > 1:
        parts.append(
            f'<polyline fill="none" stroke="{COLOURS[1]}" stroke-width="1.5" stroke-dasharray="6 4" '
            f'points="{pts(acc)}"/>'
        )
    for (px, py), iv in zip(speed, points, strict=True):
        bad = (iv.get("errors") or 0) + (iv.get("timeouts") or 0)
        speed_now = float(iv.get("tokens_per_second") or 0)
        label = escape(
            f"{float(iv['t']):.0f} s: {speed_now:.1f} t/s, {iv.get('requests', 0)} requests"
            + (f", {bad} failed" if bad else "")
        )
        parts.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="{4 if bad else 3}" fill="{"#dc2626" if bad else colour}">'
            f"<title>{label}</title></circle>"
        )
    parts.append(fr.legend([(colour, "tokens/s"), (COLOURS[1], "acceptance"), ("#dc2626", "interval with failures")]))
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text above went through escape()


def latest_soak_svg(soaks: list[StabilityResult]) -> SafeString:
    """The newest of these soaks (newest first) over time, as a pair, deployment or run page shows it."""
    if not soaks:
        return mark_safe("")
    s = soaks[0]
    return soak_svg(s.intervals, f"Soak {s.pk}: {s.setting_label}")
