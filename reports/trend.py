"""Trends over nights: ``python -m reports.trend``.

Reads the runs directory (a run that cannot be read is skipped with a
warning naming it), prints a table per gated metric and setup (median and
interval per run, and the first run at which it moved) and, with ``--plots
DIR``, draws one PNG per metric. How a series and its steps are found:
``reports.comparison.series``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from .comparison.series import trend
from .render.trend import plot_trend, trend_markdown
from .store.runs import readable_runs
from .store.writer import DEFAULT_ROOT


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0, or 2 when the runs root does not exist."""
    parser = argparse.ArgumentParser(prog="python -m reports.trend", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="directory holding the runs")
    parser.add_argument("--plots", type=Path, help="write one PNG per gated metric into this directory")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        print(f"error: --root {args.root}: got no such folder, but should be a runs root written by "
              "`python -m reports --out`", file=sys.stderr)
        return 2
    runs = readable_runs(args.root)
    if not runs:
        print(f"No readable runs in {args.root}.")
        return 0
    all_series = trend(runs)
    print(trend_markdown(all_series))
    if args.plots:
        for path in plot_trend(all_series, args.plots):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
