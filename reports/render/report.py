"""``report.md``: every section in order, from a run's results, and the plots its sections draw.

The first screen is the summary (verdict, headline figures, what is
unstable); then conformance, strength, the comparison and the trend, the
design notes' claims, each benchmark's section (``sections``), the padding
tables and the hardware of every node.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks import BENCHMARKS
from benchmarks.padding import SEED_CLAIMS
from benchmarks.stats import UNSTABLE_MARK
from hardware.node import Node

from ..comparison.comparable import setup_label
from ..conformance.suites import SuiteResult
from .claims import claims_markdown
from .conformance import conformance_markdown, strength_markdown
from .hardware import hardware_markdown, nodes_markdown, noise_markdown
from .matrix import matrix_markdown
from .mutation import score_markdown
from .padding import render_markdown
from .sections import SECTIONS
from .summary import summary_markdown
from .table import with_unstable_footnote


def build_report(results: dict, comparison: str, trend_text: str) -> str:
    run = results["run"]
    nodes = [Node.from_json(node) for node in results["nodes"]]
    seed_rows = [r for r in results["overhead"] if (r["model"], r["dp"]) in SEED_CLAIMS]
    parts = [
        "# Bucketed gradient synchronization: conformance and benchmark report",
        f"Run {run['name']} on {run['host']}: {setup_label(run['setup'])}"
        f"{' (SMOKE: timings mean nothing)' if run['smoke'] else ''}. Timed figures are medians "
        f"[95% interval of the median] over repeated rounds; {UNSTABLE_MARK} marks a figure whose spread passes "
        "its limit.",
        "## Summary", summary_markdown(results),
        "## Conformance matrix", matrix_markdown([SuiteResult(**r) for r in results["conformance"]]),
        "## Conformance", conformance_markdown([SuiteResult(**r) for r in results["conformance"]])
        if results["conformance"] else "Not run (--no-suites).",
        "## Suite strength: deliberately broken implementations",
        strength_markdown(results["strength"]) if results["strength"] else
        "Not run (smoke mode, --no-suites or --no-strength); tests/reports/conformance/test_strength.py checks the catalogue "
        "in CI.",
        score_markdown(),
        "## Comparison with the previous run of this setup", comparison,
        "## Trend over the runs", trend_text,
        "## The design notes' claims, checked", claims_markdown(results),
    ]
    for benchmark in BENCHMARKS:
        records = benchmark.records_of(results)
        if records:
            parts += [f"## {benchmark.title}", SECTIONS[benchmark.name].markdown(records)]
    parts += [
        "## Padding overhead: the seed's table recomputed",
        "Bucket size 40,000,000 elements; padding counts every element that is not a parameter "
        "(64-element start gaps and bucket-end padding). The seed's figures are claims without a "
        "derivation (docs/errata.md).",
        render_markdown(seed_rows),
        "## Padding overhead: all models, dp and policies", render_markdown(results["overhead"]),
        "## Hardware", nodes_markdown(nodes),
        "### What made the nodes noisy while the benchmarks ran", noise_markdown(nodes),
    ]
    parts += [f"### Node {node.node_rank}: {node.host.hostname}\n\n"
              + hardware_markdown(node.hardware, node.nvlink_delta, node.telemetry)
              for node in nodes]
    if results.get("plots"):
        parts += ["## Plots", "\n".join(f"![{p}]({p})" for p in results["plots"])]
    return "\n\n".join(with_unstable_footnote(part) for part in parts) + "\n"


def section_plots(results: dict, out: Path) -> list[Path]:
    """Every plot the benchmarks' sections draw from this run's records, written into ``out``."""
    written = []
    for benchmark in BENCHMARKS:
        records = benchmark.records_of(results)
        draw = getattr(SECTIONS[benchmark.name], "plots", None)
        if records and draw is not None:
            written += draw(records, out)
    return written
