"""One history chart as inline SVG, drawn at build time: no chart library, nothing fetched when it is viewed.

Each run of the setup has a slot on the x axis, in time order. A run that
measured the figure is a point: its median, its 95% interval as a bar, a
link to that night's page, and a ``<title>`` (the hover text: the interval,
the gate's decision, the commit and the environment); the gate's decision
also sets the marker's shape (triangle down: regression, triangle up:
improvement, circle: neither), so colour is never the only sign. A run that
did not is a gap: a cross on the axis whose hover says why (the refusal).
The band around each point is the gate's threshold around the previous
point's median: a point outside it moved by more than the gate tolerates.
The first step the trend found is a dashed line before the run where it
began. Colours are Okabe and Ito's, which colour-blind readers tell apart.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

from ..store.model import LevelShift
from .history import History, Slot
from .html import Markup, esc

WIDTH, HEIGHT = 640, 250
LEFT, RIGHT, TOP, BOTTOM = 58, 12, 24, 34
BLUE, VERMILLION, GREEN, PURPLE, SKY, GREY = "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#666666"
MARKERS = {"regression": ("down", VERMILLION), "improvement": ("up", GREEN)}


def number(value: float) -> str:
    return f"{value:.4g}"


def interval_text(slot: Slot, unit: str) -> str:
    point = slot.point
    text = f"median {number(point.value)} {unit}".rstrip()
    if point.interval:
        return text + f", 95% interval [{number(point.interval[0])}, {number(point.interval[1])}]"
    return text + ", no interval (too few samples)"


def hover(slot: Slot, history: History) -> str:
    """What hovering a slot shows: the run, its figure or why there is none, the gate that night, the
    environment."""
    series = history.series
    lines = [f"run {slot.run}"]
    if slot.point is None:
        lines.append(slot.missing)
    else:
        lines.append(interval_text(slot, series.unit))
        if slot.status:
            band = f" (threshold {band_text(slot.threshold, series.absolute)})" if slot.threshold else ""
            lines.append(f"gate: {slot.status}{band}")
    if series.step and series.step.run == slot.run:
        lines.append(f"step: {series.step.direction} begins here ({step_change(history)})")
    return "\n".join([*lines, slot.environment])


def run_label(run: str) -> str:
    """A run's date for an axis ('2026-11-25' for the run 20261125T140813Z); other names as they are."""
    found = re.fullmatch(r"(\d{4})(\d{2})(\d{2})T\d{6}Z(?:-\d+)?", run)
    return "-".join(found.groups()) if found else run


def band_text(threshold: float | None, absolute: bool) -> str:
    if threshold is None:
        return "none"
    return f"±{threshold:g}" if absolute else f"±{threshold:.0%}"


def step_change(history: History) -> str:
    return shift_text(history.series.step, history.series.absolute)


class Scale:
    """Values to pixels: the range of every median, interval and band edge, padded, with round ticks."""

    def __init__(self, values: Sequence[float], slots: int) -> None:
        low, high = (min(values), max(values)) if values else (0.0, 1.0)
        if high - low < 1e-12:
            pad = abs(high) * 0.1 or 1.0
            low, high = low - pad, high + pad
        span = high - low
        self.low, self.high = low - 0.06 * span, high + 0.06 * span
        self.slots = max(1, slots)
        self.step = (WIDTH - LEFT - RIGHT) / self.slots

    def x(self, i: int) -> float:
        return LEFT + (i + 0.5) * self.step

    def y(self, value: float) -> float:
        return TOP + (self.high - value) / (self.high - self.low) * (HEIGHT - TOP - BOTTOM)

    def ticks(self) -> list[float]:
        raw = (self.high - self.low) / 4
        power = 10 ** math.floor(math.log10(raw))
        step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
        first = math.ceil(self.low / step) * step
        return [first + i * step for i in range(int((self.high - first) / step) + 1)]


def band_spans(history: History) -> list[tuple[int, float, float]]:
    """(slot, low, high) of the gate's threshold at each point, around the previous point's median."""
    spans, previous = [], None
    for i, slot in enumerate(history.slots):
        if slot.point is None:
            continue
        if previous is not None and slot.threshold:
            half = slot.threshold if history.series.absolute else slot.threshold * abs(previous)
            spans.append((i, previous - half, previous + half))
        previous = slot.point.value
    return spans


def _band(spans: list[tuple[int, float, float]], scale: Scale) -> str:
    return "".join(f'<rect x="{scale.x(i) - scale.step / 2:.1f}" y="{scale.y(high):.1f}" '
                   f'width="{scale.step:.1f}" height="{scale.y(low) - scale.y(high):.1f}"/>'
                   for i, low, high in spans)


def _marker(shape: str, x: float, y: float, colour: str, hit: bool = False) -> str:
    """The marker; ``hit``: with a wide transparent edge, so a finger or a pointer finds it."""
    edge = ' stroke="transparent" stroke-width="12"' if hit else ""
    if shape == "down":
        return f'<path d="M{x - 5:.1f},{y - 4:.1f}h10l-5,8z" fill="{colour}"{edge}/>'
    if shape == "up":
        return f'<path d="M{x - 5:.1f},{y + 4:.1f}h10l-5,-8z" fill="{colour}"{edge}/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"{edge}/>'


def _point(slot: Slot, i: int, history: History, scale: Scale, run_href: str) -> str:
    x, point = scale.x(i), slot.point
    shape, colour = MARKERS.get(slot.status, ("circle", BLUE))
    bar = ""
    if point.interval:
        top, bottom = scale.y(point.interval[1]), scale.y(point.interval[0])
        bar = (f'<path d="M{x:.1f},{top:.1f}V{bottom:.1f}M{x - 3:.1f},{top:.1f}h6'
               f'M{x - 3:.1f},{bottom:.1f}h6" stroke="{colour}"/>')
    return (f'<a href="{esc(run_href.format(run=slot.run))}">'
            f'<g class="pt" data-run="{esc(slot.run)}" tabindex="0">'
            f'<title>{esc(hover(slot, history))}</title>{bar}'
            f'{_marker(shape, x, scale.y(point.value), colour, hit=True)}</g></a>')


def _gap(slot: Slot, i: int, history: History, scale: Scale) -> str:
    x, y = scale.x(i), HEIGHT - BOTTOM - 6
    return (f'<g class="gap" data-run="{esc(slot.run)}" tabindex="0">'
            f'<title>{esc(hover(slot, history))}</title>'
            f'<path d="M{x - 4:.1f},{y - 4:.1f}l8,8m0,-8l-8,8" stroke="{GREY}" stroke-width="2"/>'
            f'<rect x="{x - 8:.1f}" y="{y - 8:.1f}" width="16" height="16" fill="transparent"/></g>')


def _line(history: History, scale: Scale) -> str:
    """The medians joined, broken at each gap."""
    parts, pen_down = [], False
    for i, slot in enumerate(history.slots):
        if slot.point is None:
            pen_down = False
            continue
        parts.append(f"{'L' if pen_down else 'M'}{scale.x(i):.1f},{scale.y(slot.point.value):.1f}")
        pen_down = True
    return f'<path d="{"".join(parts)}" stroke="{BLUE}" stroke-opacity="0.5" fill="none"/>' if parts else ""


def _axes(history: History, scale: Scale) -> str:
    series, bottom = history.series, HEIGHT - BOTTOM
    parts = [f'<path d="M{LEFT},{TOP}V{bottom}H{WIDTH - RIGHT}" stroke="{GREY}" fill="none"/>']
    for tick in scale.ticks():
        y = scale.y(tick)
        parts.append(f'<path d="M{LEFT - 4},{y:.1f}H{WIDTH - RIGHT}" stroke="#ddd"/>'
                     f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{number(tick)}</text>')
    runs = [s.run for s in history.slots]
    parts.append(f'<text x="{LEFT}" y="{HEIGHT - 8}">{esc(run_label(runs[0]))}</text>')
    if len(runs) > 1:
        parts.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 8}" text-anchor="end">'
                     f'{esc(run_label(runs[-1]))}</text>')
    parts.append(f'<text class="axis-label" x="14" y="{(TOP + bottom) / 2:.0f}" '
                 f'transform="rotate(-90 14 {(TOP + bottom) / 2:.0f})" text-anchor="middle">'
                 f'{esc(series.unit or "value")}, {esc(series.better)} is better</text>')
    return "".join(parts)


def _step(history: History, scale: Scale) -> str:
    step = history.series.step
    runs = [s.run for s in history.slots]
    if step is None or step.run not in runs:
        return ""
    x = scale.x(runs.index(step.run)) - scale.step / 2
    label = f"{'▼' if step.direction == 'regression' else '▲'} step: {step.direction} {step_change(history)}"
    anchor = "end" if x > WIDTH / 2 else "start"
    return (f'<g class="step" data-run="{esc(step.run)}"><path d="M{x:.1f},{TOP - 8}V{HEIGHT - BOTTOM}" '
            f'stroke="{PURPLE}" stroke-width="2" stroke-dasharray="5 3"/>'
            f'<text x="{x + (-4 if anchor == "end" else 4):.1f}" y="{TOP - 10}" text-anchor="{anchor}" '
            f'fill="{PURPLE}">{esc(label)}</text></g>')


def shift_text(shift: LevelShift, absolute: bool) -> str:
    return f"{shift.change:+.3g}" if absolute else f"{shift.change:+.1%}"


def _change_points(history: History, scale: Scale) -> str:
    """A thin dotted line before each night a new level began (the step, drawn apart, excepted)."""
    runs = [s.run for s in history.slots]
    step = history.series.step
    marks = []
    for shift in history.change_points or ():
        if shift.run not in runs or (step is not None and step.run == shift.run):
            continue
        x = scale.x(runs.index(shift.run)) - scale.step / 2
        marks.append(f'<path d="M{x:.1f},{TOP}V{HEIGHT - BOTTOM}" stroke="{PURPLE}" stroke-width="1" '
                     f'stroke-dasharray="1 3"><title>change point: {esc(shift.direction)} '
                     f'{esc(shift_text(shift, history.series.absolute))} from {esc(shift.run)}</title></path>')
    return f'<g class="change-points">{"".join(marks)}</g>' if marks else ""


def chart_svg(history: History, run_href: str) -> Markup:
    """The chart of one history; ``run_href`` is the link to a run's page with ``{run}`` in it."""
    slots = history.slots
    spans = band_spans(history)
    values = [v for s in slots if s.point for v in (s.point.value, *(s.point.interval or ()))]
    scale = Scale(values + [v for _, low, high in spans for v in (low, high)], len(slots))
    points = [_point(s, i, history, scale, run_href) if s.point else _gap(s, i, history, scale)
              for i, s in enumerate(slots)]
    label = f"{history.series.key}: {sum(1 for s in slots if s.point)} points over {len(slots)} runs"
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{esc(label)}" '
        f'data-key="{esc(history.series.key)}" data-slots="{len(slots)}">'
        f'<g class="band" fill="{SKY}" fill-opacity="0.28"><title>the gate\'s threshold around the previous '
        f'run\'s median</title>{_band(spans, scale)}</g>{_axes(history, scale)}{_line(history, scale)}'
        f'{_change_points(history, scale)}{_step(history, scale)}{"".join(points)}</svg>')


LEGEND = Markup(
    f'<p class="legend"><svg viewBox="0 0 16 12" width="16" height="12">'
    f'{_marker("circle", 8, 6, BLUE)}</svg> '
    f'median with its 95% interval · <svg viewBox="0 0 16 12" width="16" height="12">'
    f'{_marker("down", 8, 6, VERMILLION)}</svg> the gate found a regression that night · '
    f'<svg viewBox="0 0 16 12" width="16" height="12">{_marker("up", 8, 6, GREEN)}</svg> an improvement · '
    f'<span class="swatch"></span> the gate\'s threshold around the previous median · '
    f'<span style="color:{PURPLE}">┆ ▼/▲ step</span>: where the trend found the level moved beyond the threshold '
    f'· <span style="color:{PURPLE}">⋮</span> a change point (a smaller move of the level) · '
    f'<span style="color:{GREY}">✕</span> no figure that night (hover: why) '
    'Hover or focus a point for its interval, commit and environment; click it for that night\'s page.</p>')
