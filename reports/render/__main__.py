"""Rebuild a run's report from its ``results.json`` alone: ``python -m reports.render RUN_DIR [--out DIR]``.

Writes ``report.md`` and the plots into ``--out`` (default: the run's own
directory, for a run of the current schema, whose rebuilt report equals the
one the job wrote). A run of an older schema is read through its upgrade,
which leaves out what the current model has no place for: its rebuilt report
is not the one it wrote, so it needs ``--out`` and never overwrites it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ..store.runs import RunError, load_results
from .report import build_report, draw_plots


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.render", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a run directory holding results.json")
    parser.add_argument("--out", type=Path, help="where report.md and the plots go (default: the run directory)")
    args = parser.parse_args(argv)
    try:
        results = load_results(args.run)
    except RunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if results.upgraded and args.out is None:
        print(f"error: {args.run} was written under schema {results.upgraded.from_schema}: its rebuilt report would "
              "not be the one it wrote, so give --out DIR rather than overwrite it", file=sys.stderr)
        return 2
    out = args.out or args.run
    out.mkdir(parents=True, exist_ok=True)
    plots = draw_plots(results, out)
    (out / "report.md").write_text(build_report(results))
    print(f"wrote {out / 'report.md'} and {len(plots)} plots", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
