"""Rebuild a run's report from its ``results.json`` alone: ``python -m reports.render RUN_DIR [--out DIR]``.

Writes ``report.md`` and the plots into ``--out`` (default: the run's own
directory, for a run of the current schema, whose rebuilt report equals the
one the job wrote). A run of an older schema is read through its upgrade,
which leaves out what the current model has no place for: its rebuilt report
is not the one it wrote, so it needs ``--out`` and never overwrites it.
"""

from __future__ import annotations

import sys
from typing import Sequence

from cli import OutFolder, Parser

from ..store.arguments import RunFolder
from ..store.runs import load_results
from .report import build_report, draw_plots


def parser() -> Parser:
    p = Parser(prog="python -m reports.render", description=__doc__)
    p.add_argument("run", type=RunFolder(), help="a run directory holding results.json")
    p.add_argument("--out", type=OutFolder("the report's folder"),
                   help="where report.md and the plots go (default: the run directory)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser_ = parser()
    args = parser_.parse_args(argv)
    results = load_results(args.run)
    if results.upgraded and args.out is None:
        parser_.error(f"--out: got none for {args.run}, written under schema {results.upgraded.from_schema}, but "
                      "should be given: its rebuilt report would not be the one it wrote, so it is never overwritten")
    out = args.out or args.run
    out.mkdir(parents=True, exist_ok=True)
    plots = draw_plots(results, out)
    (out / "report.md").write_text(build_report(results))
    print(f"wrote {out / 'report.md'} and {len(plots)} plots", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
