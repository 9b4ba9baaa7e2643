"""A setup's history: a table of every gated figure (readable without the charts), the charts, and the gated
counts; and the page listing every setup."""

from __future__ import annotations

from typing import Sequence

from .chart import LEGEND, band_text, chart_svg, number, shift_text, step_change
from .context import Context
from .history import History, SetupHistory, Slot
from .html import Markup, join, link, page, slug, table, tag

FILTER = Markup('<input type="search" class="filter" placeholder="e.g. step_time">')


def _figure(slot: Slot | None) -> str:
    if slot is None:
        return ""
    point = slot.point
    return number(point.value) + (f" [{number(point.interval[0])}, {number(point.interval[1])}]"
                                  if point.interval else "")


def _measured(history: History) -> list[Slot]:
    return [s for s in history.slots if s.point is not None]


def _change(history: History) -> str:
    points = _measured(history)
    if len(points) < 2:
        return ""
    old, new = points[-2].point.value, points[-1].point.value
    if history.series.absolute:
        return f"{new - old:+.3g}"
    return f"{(new - old) / abs(old):+.1%}" if old else "from 0"


def _change_points(history: History) -> str:
    if history.change_points is None:
        return "not found (ruptures is not installed)"
    return "; ".join(f"{shift_text(c, history.series.absolute)} at {c.run}" for c in history.change_points) or "none"


def _step(history: History) -> str:
    step = history.series.step
    if step is None:
        return "none"
    return f"{'▼' if step.direction == 'regression' else '▲'} {step.direction} {step_change(history)} at {step.run}"


def summary_table(histories: Sequence[History], anchors: bool) -> Markup:
    rows = []
    for h in histories:
        measured = _measured(h)
        key = link(f"#{figure_id(h)}", h.series.key) if anchors else h.series.key
        rows.append({"figure": key, "unit": h.series.unit, "better": h.series.better,
                     "latest [95% interval]": _figure(measured[-1] if measured else None),
                     "previous": _figure(measured[-2] if len(measured) > 1 else None), "change": _change(h),
                     "gate threshold": band_text(h.slots[-1].threshold, h.series.absolute),
                     "step": _step(h), "change points": _change_points(h),
                     "runs with it": f"{len(measured)} of {len(h.slots)}"})
    return table(rows)


def counts_table(histories: Sequence[History]) -> Markup:
    rows = []
    for h in histories:
        values = [(s.run, s.point.value) for s in _measured(h)]
        changed = [run for (_, a), (run, b) in zip(values, values[1:]) if a != b]
        rows.append({"count": h.series.key, "unit": h.series.unit, "better": h.series.better,
                     "latest": number(values[-1][1]) if values else "",
                     "lowest": number(min(v for _, v in values)) if values else "",
                     "highest": number(max(v for _, v in values)) if values else "",
                     "last changed at": changed[-1] if changed else "never",
                     "runs with it": f"{len(values)} of {len(h.slots)}"})
    return table(rows)


def figure_id(history: History) -> str:
    return f"fig-{slug(history.series.key)}"


def chart_card(history: History, ctx: Context, depth: int) -> Markup:
    series = history.series
    measured = _measured(history)
    gaps = len(history.slots) - len(measured)
    latest = _figure(measured[-1] if measured else None) or "none"
    caption = join([tag("strong", series.key), f" ({series.unit or 'no unit'}, {series.better} is better): ",
                    f"latest {latest}; step: {_step(history)}",
                    f"; {gaps} run{'s' if gaps != 1 else ''} without it" if gaps else ""])
    return tag("figure", join([tag("figcaption", caption), chart_svg(history, ctx.run_href(depth))]),
               class_="card", id=figure_id(history), data_key=series.key)


def setup_history_html(history: SetupHistory, ctx: Context, depth: int) -> Markup:
    runs = history.runs
    parts = [tag("p", f"{len(runs)} run{'s' if len(runs) != 1 else ''} of this setup kept, {runs[0]} to "
                      f"{runs[-1]}; each figure one series (runs of other setups are never on its line).")]
    if history.figures:
        parts += [summary_table(history.figures, anchors=True), LEGEND,
                  tag("label", join(["Show figures containing ", FILTER])),
                  tag("div", join([chart_card(h, ctx, depth) for h in history.figures]), class_="charts")]
    else:
        parts.append(tag("p", "No gated figure in these runs."))
    if history.counts:
        parts += [tag("h3", "Gated counts (any move in the bad direction counts)"),
                  counts_table(history.counts)]
    return join(parts)


def history_page(history: SetupHistory, ctx: Context) -> str:
    body = join([tag("h1", f"History: {history.setup.label()}"), setup_history_html(history, ctx, depth=1)])
    return page(f"History: {history.setup.label()}", body, depth=1, built=ctx.built)


def history_index(histories: Sequence[SetupHistory], ctx: Context) -> str:
    rows = [{"setup": ctx.setup_link(h.setup, depth=1), "runs": len(h.runs), "first": h.runs[0],
             "last": h.runs[-1], "gated figures": len(h.figures), "gated counts": len(h.counts)}
            for h in histories]
    body = join([tag("h1", "History of every setup"),
                 tag("p", "One page per setup (backend, devices, world size, nodes, launch mode, method): "
                          "runs of different setups are never compared or drawn on one line. Smoke runs are "
                          "never drawn."),
                 table(rows) if rows else tag("p", "No run that is not a smoke run: nothing to draw yet.")])
    return page("History", body, depth=1, built=ctx.built)
