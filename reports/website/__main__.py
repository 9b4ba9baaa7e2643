"""Write the nightly site from the runs: ``python -m reports.website [--root reports/runs] [--out
reports/site] [--keep N]``.

A static folder (no server, nothing fetched when viewed: open index.html from
disk or publish the folder on any static host): the latest run's verdict, the
conformance matrix, the gate's decisions and the design notes' claims; the
history of every gated figure of every setup; each run's page with its
report, its environment against the previous run of its setup, the command
that reproduces it, and its figures exported for github-action-benchmark and
in nccl-tests' JSON. ``python -m reports`` writes it after each run.
"""

from __future__ import annotations

import sys
from typing import Sequence

from cli import Count, OutFolder, Parser

from ..store.arguments import RunsRoot
from ..store.runs import Runs
from .build import DEFAULT_KEEP, PAGE_LIMIT, SiteError, build_site, site_beside


def parser() -> Parser:
    p = Parser(prog="python -m reports.website", description=__doc__)
    p.add_argument("--root", type=RunsRoot(), default=Runs(), help="directory holding the runs")
    p.add_argument("--out", type=OutFolder("the site's folder"),
                   help="the site's folder (default: beside --root, named after it: reports/site)")
    p.add_argument("--keep", type=Count(1, unit="of runs"), default=DEFAULT_KEEP,
                   help=f"runs of each setup the site keeps, the newest (default {DEFAULT_KEEP})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser_ = parser()
    args = parser_.parse_args(argv)
    try:
        built = build_site(args.root, args.out or site_beside(args.root), args.keep)
    except SiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    page, size = built.largest_page
    print(f"wrote {built.out}/index.html: {len(built.runs)} runs, {len(built.pages)} pages, "
          f"{built.total / 1e6:.1f} MB; the largest page {page} ({size / 1e3:.0f} kB)"
          + (f"; {len(built.unreadable)} runs cannot be read (listed on the index)" if built.unreadable
             else ""),
          file=sys.stderr)
    if size > PAGE_LIMIT:
        print(f"warning: {page} is {size / 1e6:.1f} MB, over the {PAGE_LIMIT / 1e6:.1f} MB the docs state; a "
              "smaller --keep shortens the history pages", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
