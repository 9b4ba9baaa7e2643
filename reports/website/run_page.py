"""One night's page: its verdict, the command that reproduces it, what changed in its environment since the
previous run of its setup, its failing checks, its exports, and its whole report (tables as tables, plots
inline, the hardware of every node) as the job wrote it."""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import Sequence

from ..conformance.families import family_of
from ..render.matrix import matrix
from ..render.report import ShownApart, build_report
from ..store.model import Results
from ..store.upgrade import written_before
from ..views.compositions import compositions_view
from ..views.run import command_missing
from .bisection import bisection_html
from .compositions import compositions_html
from .context import Context
from .environment import differences, environment
from .export import export_files
from .html import Markup, join, link, page, table, tag
from .markdown import keep_images, markdown_html
from .matrix import failure_anchor
from .verdict import verdict_html

SHOWN_ABOVE = ShownApart(verdict=True, reproduction=True, compositions=True, bisection=True)
"""What the page shows above the report it embeds, which the report leaves out."""
SECTIONS = (("reproduce", "Reproduce"), ("environment", "Environment"), ("failing-checks", "Failing checks"),
            ("compositions", "Compositions"), ("exports", "Exports"), ("report", "Report"), ("hardware", "Hardware"))


def reproduce_html(results: Results) -> Markup:
    run = results.run
    lines = []
    if run.commit:
        lines.append(f"git checkout {run.revision}")
    if run.command:
        lines.append(shlex.join(run.command))
    if not lines:
        return tag("p", f"Not recorded ({written_before('command')}).")
    notes = []
    missing = command_missing(results)
    if missing:
        notes.append(missing)
    if run.dirty:
        notes.append("The tree had uncommitted changes (+dirty): the commit alone does not reproduce it.")
    return join([tag("pre", tag("code", "\n".join(lines))), *(tag("p", n) for n in notes)])


def environment_html(results: Results, previous: Results | None, ctx: Context) -> Markup:
    if previous is None:
        return join([tag("p", "No earlier run of this setup to compare the environment with. This run's:"),
                     table([{"fact": k, "this run": v} for k, v in environment(results).items()])])
    found = differences(previous, results)
    changed = [d.fact for d in found if d.changed]
    listed = f" ({', '.join(changed)})." if changed else "."
    head = join(["Against ", ctx.run_link(previous.run.name, depth=2), ", the previous run of this setup: "
                 f"{len(changed)} of {len(found)} facts changed{listed}"])
    rows = [{"fact": d.fact, "previous run": d.before, "this run": d.now,
             "": "≠ changed" if d.changed else ""} for d in found]
    return join([tag("p", head), table(rows, row_classes=["changed" if d.changed else None for d in found])])


def failing_html(results: Results) -> Markup:
    """The failing checks of each implementation and family, under the ids the matrix links to."""
    found: dict[tuple[str, str], list[Markup]] = {}
    for r in results.conformance:
        for failure in r.failures:
            if not failure.test:
                found.setdefault((r.label, "suite run"), []).append(tag("li", failure.message))
                continue
            crash = " (crashed: an exception other than a failed check)" if failure.test in r.crashed_ids else ""
            found.setdefault((r.label, family_of(failure.test)), []).append(
                tag("li", join([tag("code", failure.test), crash, ": " if failure.message else "", failure.message])))
    grid = matrix(results.conformance)
    for row in grid.rows:
        for family, cell in row.cells.items():
            if cell.outcome == "FAIL" and (row.label, family) not in found:
                found[(row.label, family)] = [
                    tag("li", f"the failing tests were not recorded; the first: {cell.note}")]
    if not found:
        return tag("p", "None: no check failed." if results.conformance else "No suite ran.")
    return join([join([tag("h3", f"{label}: {family}", id=failure_anchor(label, family)),
                       tag("ul", join(items))]) for (label, family), items in found.items()])


def run_page(results: Results, previous: Results | None, plots: Sequence[str], ctx: Context) -> str:
    """``plots``: the run's PNGs copied beside the page (the report's other images are named in words). The
    report is rendered from the results less what the page shows above it (``SHOWN_ABOVE``), each once."""
    report = build_report(replace(results, plots=tuple(plots)), apart=SHOWN_ABOVE)
    run, name, bisection = results.run, results.run.name, results.bisection
    sections = ((("bisection", "Bisection"),) if bisection else ()) + SECTIONS
    toc = tag("nav", join([link(f"#{anchor}", title) for anchor, title in sections], " · "), class_="toc")
    exports = tag("ul", join([tag("li", link(f, f)) for f in export_files(results)]))
    body = join([
        tag("h1", f"Run {name}"),
        tag("p", join(["On ", run.host, ": ", ctx.setup_link(run.setup, depth=2),
                       " (smoke: timings mean nothing)" if run.setup.smoke else "", "."])),
        toc, verdict_html(results),
        *((tag("h2", "Bisection: which commit moved it", id="bisection"), bisection_html(bisection))
          if bisection else ()),
        tag("h2", "Reproduce", id="reproduce"), reproduce_html(results),
        tag("h2", "Environment against the previous run of this setup", id="environment"),
        environment_html(results, previous, ctx),
        tag("h2", "Failing checks", id="failing-checks"), failing_html(results),
        tag("h2", "Compositions of the configuration space", id="compositions"),
        compositions_html(compositions_view(results)),
        tag("h2", "Exports", id="exports"),
        tag("p", "The gated figures in github-action-benchmark's custom formats, and the bus-bandwidth sweep "
                 "in nccl-tests' JSON columns:"), exports,
        tag("h2", "Report", id="report"),
        markdown_html(keep_images(report, set(plots)), shift=2),
    ])
    return page(f"Run {name}", body, depth=2, built=ctx.built)
