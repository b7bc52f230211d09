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
    """Every text in the picture is escaped here, so the result may be inserted as is."""
    series = _series([f for f in figs if f.speedup is not None or f.acceptance is not None])
    if not series:
        return mark_safe("")
    ks = sorted({k for points in series.values() for k in points})
    top_speed = max([1.2] + [f.speedup * 1.1 for points in series.values() for f in points.values() if f.speedup])
    fr = FRAME
    pw = fr.pw

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
    parts.append(_no_gain(top_speed))
    parts.append(_x_axis([(x(k), str(k)) for k in ks], "K (draft tokens per step)"))
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


def clients_svg(figs: list[Figure], title: str) -> SafeString:
    """Speedup against concurrent clients, one line per content type and setting (measured under load)."""
    series: dict[str, dict[int, Figure]] = defaultdict(dict)
    for f in figs:
        if f.speedup is None:
            continue
        key = f"{f.content_type or 'unspecified'} {f.obj.setting_label if f.obj is not None else f'K={f.k}'}"
        cur = series[key].get(f.clients)
        if cur is None or (f.speedup or 0) > (cur.speedup or 0):
            series[key][f.clients] = f
    series = {k: v for k, v in sorted(series.items()) if any(c > 1 for c in v)}  # only settings measured under load
    if not series:
        return mark_safe("")
    counts = sorted({c for points in series.values() for c in points})
    top_speed = max([1.2] + [f.speedup * 1.1 for points in series.values() for f in points.values() if f.speedup])
    fr = FRAME

    def x(c: int) -> float:
        return LEFT + (fr.pw / 2 if len(counts) == 1 else fr.pw * counts.index(c) / (len(counts) - 1))

    parts = fr.start(
        title,
        top_value=top_speed,
        tick=lambda v: f"{v:.1f}×",
        left_title="speedup (solid)",
        right_title="acceptance (dashed)",
    )
    parts.append(_no_gain(top_speed))
    parts.append(
        _x_axis(
            [(x(c), str(c)) for c in counts],
            "concurrent clients (speedup against the plain server at the same concurrency)",
        )
    )
    for i, (key, points) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        line = [(x(c), fr.y_scaled(points[c].speedup or 0.0, top_speed)) for c in counts if c in points]
        acc = [(x(c), fr.y_fraction(a)) for c in counts if c in points and (a := points[c].acceptance) is not None]
        if len(line) > 1:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts(line)}"/>')
        if len(acc) > 1:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" stroke-dasharray="6 4" '
                f'points="{pts(acc)}"/>'
            )
        for c in counts:
            if c in points:
                f = points[c]
                label = escape(f"{key}, {c} client{'s' if c != 1 else ''}: {f.speedup:.2f}×")
                parts.append(
                    f'<circle cx="{x(c):.1f}" cy="{fr.y_scaled(f.speedup or 0.0, top_speed):.1f}" r="4" '
                    f'fill="{colour}"><title>{label}</title></circle>'
                )
    parts.append(fr.legend([(COLOURS[i % len(COLOURS)], key[:32]) for i, key in enumerate(series)]))
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
