"""``report.md`` and the plots of a run, from its results alone: what the job writes and ``python -m
reports.render`` rebuilds.

The first screen is the summary (verdict, headline figures, what is
unstable); then conformance, strength, the comparison and the trend, the
design notes' claims, each benchmark's section (``sections``), the padding
tables and the hardware of every node.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks import BENCHMARKS
from benchmarks.padding import NOTES_CLAIMS
from benchmarks.stats import UNSTABLE_MARK

from ..bisect.search import text as bisection_text
from ..store.model import ClaimVerdict, Results
from ..store.upgrade import written_before
from ..views.compositions import compositions_view
from ..views.run import claim_rows, claims_missing
from .comparison import run_comparison_markdown
from .conformance import compositions_markdown, conformance_markdown, strength_markdown
from .hardware import hardware_markdown, nodes_markdown, noise_markdown
from .matrix import matrix_markdown
from .mutation import score_markdown
from .padding import render_markdown
from .sections import SECTIONS
from .summary import summary_markdown
from .table import table, with_unstable_footnote
from .trend import plot_trend, trend_markdown


def claims_markdown(claims: tuple[ClaimVerdict, ...]) -> str:
    missing = claims_missing(claims)
    if missing:
        return missing
    return table(claim_rows(claims), numparse=False) + (
        "\n\nThe typical-overhead table is recomputed from real shapes under "
        "[Padding overhead: the design notes' table recomputed](#padding-overhead-the-design-notes-table-recomputed); "
        "docs/errata.md explains each difference.")


def phases_markdown(results: Results) -> str:
    if not results.phases:
        return f"Not timed ({written_before('phases')})."
    rows = [{"phase": p.phase, "seconds": f"{p.seconds:.0f}"} for p in results.phases]
    total = sum(p.seconds for p in results.phases)
    return table(rows, numparse=False) + (f"\n\n{total:.0f} s in all ({total / 60:.1f} min); judging and writing the "
                                          "run, and the site, follow.")


@dataclass(frozen=True)
class ShownApart:
    """What a page that embeds the report shows apart, above it: the report then leaves each out."""

    verdict: bool = False
    reproduction: bool = False
    compositions: bool = False
    bisection: bool = False


def _no_strength_rows(phase) -> str:
    """Why a run has no strength rows: the phase did not run, or it measured none in its budget (the main job's
    deadline may leave it none) and no earlier run had measured any to carry over."""
    checked = "tests/selfcheck/test_strength.py checks the catalogue in CI."
    if phase is None:
        return f"Not run (smoke mode, --no-suites, --no-strength, or no time left before the deadline); {checked}"
    within = "with no budget" if phase.budget is None else f"in its {phase.budget:g} s"
    return (f"No rows: the phase measured {phase.measured} of the {phase.catalogue} entries {within}, and no "
            f"earlier run under this runs root had measured any to carry over; {checked}")


def build_report(results: Results, apart: ShownApart = ShownApart()) -> str:
    """The whole report, less what ``apart`` shows (the site's run page shows those above it, once)."""
    run = results.run
    notes_rows = [r for r in results.overhead if (r.model, r.dp) in NOTES_CLAIMS]
    reproduce = run.command and not apart.reproduction
    parts = [
        "# Bucketed gradient synchronization: conformance and benchmark report",
        f"Run {run.name} on {run.host}: {run.setup.label()}"
        f"{' (SMOKE: timings mean nothing)' if run.setup.smoke else ''}. Timed figures are medians "
        f"[95% interval of the median] over repeated rounds; {UNSTABLE_MARK} marks a figure whose spread passes "
        "its limit." + (f" Reproduce: `{' '.join(run.command)}` at commit {run.commit}." if reproduce else ""),
        "## Summary", with_unstable_footnote(summary_markdown(results, not apart.verdict), results.metrics),
        "## Conformance matrix", matrix_markdown(results.conformance),
        "## Conformance", conformance_markdown(results.conformance) if results.conformance
        else "Not run (--no-suites).",
        *(("## Compositions of the configuration space", compositions_markdown(compositions_view(results)))
          if not apart.compositions else ()),
        "## Suite strength: deliberately broken implementations",
        strength_markdown(results.strength, results.strength_phase) if results.strength else
        _no_strength_rows(results.strength_phase),
        score_markdown(results.mutation),
        "## Comparison with the previous run of this setup",
        with_unstable_footnote(run_comparison_markdown(results.comparison), results.comparison),
        *(("## Bisection: which commit moved it", f"```\n{bisection_text(results.bisection)}\n```")
          if results.bisection and not apart.bisection else ()),
        "## Trend over the last runs of this setup", trend_markdown(results.trend),
        "## The design notes' claims, checked", claims_markdown(results.claims),
    ]
    for benchmark in BENCHMARKS:
        records = results.records(benchmark.name)
        if records:
            parts += [f"## {benchmark.title}",
                      with_unstable_footnote(SECTIONS[benchmark.name].markdown(records), records)]
    parts += [
        "## Padding overhead: the design notes' table recomputed",
        "Bucket size 40,000,000 elements; padding counts every element that is not a parameter "
        "(64-element start gaps and bucket-end padding). The notes' figures are claims without a "
        "derivation (docs/errata.md).",
        render_markdown(notes_rows),
        "## Padding overhead: all models, dp and policies", render_markdown(results.overhead),
        "## How long each phase took", phases_markdown(results),
        "## Hardware", nodes_markdown(results.nodes),
        "### What made the nodes noisy while the benchmarks ran", noise_markdown(results.nodes),
    ]
    parts += [f"### Node {node.node_rank}: {node.host.hostname}\n\n"
              + hardware_markdown(node.hardware, node.nvlink_delta, node.telemetry) for node in results.nodes]
    if results.upgraded:
        parts += ["## Read from an older schema",
                  f"Written under schema {results.upgraded.from_schema}; read into this model without: "
                  + ("; ".join(results.upgraded.left_out) or "nothing") + "."]
    if results.plots:
        parts += ["## Plots", "\n".join(f"![{p}]({p})" for p in results.plots)]
    return "\n\n".join(parts) + "\n"


def draw_plots(results: Results, out: Path) -> list[Path]:
    """Every plot of a run, written into ``out``: each benchmark section's, and the trend's."""
    written = []
    for benchmark in BENCHMARKS:
        records = results.records(benchmark.name)
        draw = getattr(SECTIONS[benchmark.name], "plots", None)
        if records and draw is not None:
            written += draw(records, out)
    return written + plot_trend(results.trend, out)
