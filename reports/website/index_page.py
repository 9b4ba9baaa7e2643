"""The first page: the latest run's verdict and what decided it, the conformance matrix, the gate's decisions,
the history of the newest setup that is not a smoke run, the design notes' claims, the recent runs, and every
run that cannot be read, with why."""

from __future__ import annotations

from typing import Sequence

from ..store.model import ClaimVerdict, Results
from ..store.runs import Unreadable
from ..views.compositions import compositions_view
from ..views.run import claim_rows, claims_missing, verdict_view
from .compositions import compositions_html
from .context import Context
from .gate import gate_html
from .history import SetupHistory
from .history_page import setup_history_html
from .html import Markup, join, link, page, table, tag
from .matrix import matrix_html
from .verdict import verdict_html

RECENT = 10
SECTIONS = (("matrix", "Conformance matrix"), ("compositions", "Compositions"), ("gate", "The gate"),
            ("history", "History"), ("claims", "Claims"), ("runs", "Recent runs"))
UNREADABLE_SHOWN = 50


def claims_html(claims: Sequence[ClaimVerdict]) -> Markup:
    missing = claims_missing(tuple(claims))
    return tag("p", missing) if missing else table(claim_rows(tuple(claims), marked=True))


def verdict_word(results: Results) -> str:
    view = verdict_view(results)
    return f"{view.symbol} {view.word}" if view.word else "not recorded"


def runs_table(runs: Sequence[Results], ctx: Context, depth: int) -> Markup:
    """Newest first: each run with its setup, verdict, gated regressions and commit."""
    rows = []
    for results in reversed(runs):
        comparison = results.comparison
        compared = comparison and comparison.against and not comparison.error
        regressions = len(comparison.regressions) if compared else ""
        rows.append({"run": ctx.run_link(results.run.name, depth),
                     "setup": ctx.setup_link(results.run.setup, depth),
                     "verdict": verdict_word(results), "gated regressions": regressions,
                     "commit": (results.run.commit or "")[:12], "host": results.run.host})
    return table(rows)


def unreadable_html(unreadable: Sequence[Unreadable]) -> Markup:
    if not unreadable:
        return Markup("")
    shown = list(reversed(unreadable))[:UNREADABLE_SHOWN]
    more = len(unreadable) - len(shown)
    items = [tag("li", join([tag("code", u.name), ": ", u.why])) for u in shown]
    return tag("section", join([
        tag("h2", f"⚠ Runs that cannot be read: {len(unreadable)}", id="unreadable"),
        tag("p", "Left out of the site; nothing else is affected. Newest first:"),
        tag("ul", join(items)), tag("p", f"... and {more} older.") if more else ""]), class_="unreadable")


def index_page(runs: Sequence[Results], histories: Sequence[SetupHistory], unreadable: Sequence[Unreadable],
               ctx: Context) -> str:
    """``runs``: the kept runs, oldest first; the last is the latest."""
    if not runs:
        body = join([tag("h1", "No run yet"),
                     tag("p", "No readable run in the runs directory: `python -m reports` writes one."),
                     unreadable_html(unreadable)])
        return page("Latest run", body, depth=0, built=ctx.built)
    results = runs[-1]
    run, name = results.run, results.run.name
    drawn = max(histories, key=lambda h: h.runs[-1]) if histories else None
    history = [tag("h2", "History", id="history")]
    if drawn is None:
        history.append(tag("p", "No run that is not a smoke run: smoke runs are never drawn."))
    else:
        history += [tag("h3", join(["Setup: ", ctx.setup_link(drawn.setup, depth=0)])),
                    tag("p", "The setup of the newest run that is not a smoke run."
                        + (" The latest run is a smoke run: never drawn." if run.setup.smoke else "")),
                    setup_history_html(drawn, ctx, depth=0)]
    others = [h for h in histories if h is not drawn]
    if others:
        links = join([ctx.setup_link(h.setup, 0) for h in others], "; ")
        history.append(tag("p", join(["Other setups: ", links, "."])))
    body = join([
        tag("h1", join(["Latest run: ", ctx.run_link(name, depth=0)])),
        tag("p", join([f"On {run.host}: ", ctx.setup_link(run.setup, depth=0), ". Commit ",
                       tag("code", run.commit or "not recorded"), "."])),
        tag("nav", join([link(f"#{anchor}", title) for anchor, title in SECTIONS], " · "), class_="toc"),
        unreadable_html(unreadable),
        verdict_html(results),
        tag("h2", "Conformance matrix", id="matrix"),
        matrix_html(results.conformance, f"runs/{name}/index.html"),
        tag("h2", "Compositions of the configuration space", id="compositions"),
        compositions_html(compositions_view(results)),
        tag("h2", "The gate against the previous run of this setup", id="gate"),
        gate_html(results, lambda other: ctx.run_link(other, depth=0)),
        *history,
        tag("h2", "The design notes' claims, checked", id="claims"), claims_html(results.claims),
        tag("h2", "Recent runs", id="runs"), runs_table(runs[-RECENT:], ctx, depth=0),
        tag("p", link("runs.html", f"All {len(runs)} runs in the site")),
    ])
    return page("Latest run", body, depth=0, built=ctx.built)


def runs_page(runs: Sequence[Results], ctx: Context) -> str:
    body = join([tag("h1", f"All runs in the site: {len(runs)}"),
                 tag("p", "Newest first; the site keeps the last runs of each setup (--keep)."),
                 runs_table(runs, ctx, depth=0)])
    return page("All runs", body, depth=0, built=ctx.built)
