"""Trends over nights: ``python -m reports.trend``.

Reads the runs directory (a run that cannot be read is skipped with a
warning naming it), prints a table per gated metric and setup (median and
interval per run, and the first run at which it moved) and, with ``--plots
DIR``, draws one PNG per metric. How a series and its steps are found:
``reports.comparison.series``.
"""

from __future__ import annotations

import sys
from typing import Sequence

from cli import OutFolder, Parser

from .store.arguments import RunsRoot
from .comparison.series import trend
from .render.trend import plot_trend, trend_markdown
from .store.runs import Runs


def parser() -> Parser:
    p = Parser(prog="python -m reports.trend", description=__doc__)
    p.add_argument("--root", type=RunsRoot(), default=Runs(), help="directory holding the runs")
    p.add_argument("--plots", type=OutFolder("the plots' folder"),
                   help="write one PNG per gated metric into this directory")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0, or 2 for a bad argument (a runs root that does not exist among them)."""
    args = parser().parse_args(argv)
    runs = args.root.readable()
    if not runs:
        print(f"No readable runs in {args.root.root}.")
        return 0
    all_series = trend(runs)
    print(trend_markdown(all_series))
    if args.plots:
        for path in plot_trend(all_series, args.plots):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
