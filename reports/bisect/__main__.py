"""Find the first commit at which a figure moved: ``python -m reports.bisect --good REV [--bad REV]``.

Each commit is measured in a worktree of its own (your working tree is never touched) by its own nightly job
restricted to one benchmark (or ``--command``), interleaved with runs of the good commit so that the machine's
drift falls on both, and judged three ways: moved, same, or unknown (more runs, up to ``--budget``). ``git bisect
run`` drives the search; a commit that cannot be measured is skipped and named. Exit 0 when it answered (the first
moved commit, or no move), 1 when it could not tell (unknown, or several commits it could not measure), 2 on bad
input."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Sequence

from benchmarks import BENCHMARKS
from cli import Count, OutFolder, Parser, Real, interruptible
from datamodel import to_json
from ranks.capacity import WorldSize

from .measure import Measurement, default_command
from .search import TOOL_ROOT, BisectError, bisect, resolve, save, text

DEFAULT_METRIC = "step_time/reference/ratio_to_torch_ddp"
"""The reference's step over torch DDP's, measured side by side in each run: a slower reference raises it."""


def parser() -> Parser:
    p = Parser(prog="python -m reports.bisect", description=__doc__)
    p.add_argument("--good", required=True, help="a commit whose figure is as it should be")
    p.add_argument("--bad", default="HEAD", help="a later commit whose figure moved (default HEAD)")
    p.add_argument("--repo", type=Path, default=TOOL_ROOT, help="the repository (default: this checkout)")
    p.add_argument("--benchmark", choices=[b.name for b in BENCHMARKS], default="step_time",
                   help="the benchmark each commit's nightly job runs (default step_time)")
    p.add_argument("--metric", default=DEFAULT_METRIC, help=f"the figure's key in results.json (default "
                                                             f"{DEFAULT_METRIC})")
    p.add_argument("--command", default=None, metavar="CMD",
                   help="measure with this command instead of the nightly job; {python} and {out} (a fresh runs "
                        "root it must write a run into) are filled in")
    p.add_argument("--rounds", type=Count(2, 1000, unit="of rounds"), default=None,
                   help="fixed rounds of each run (default: sampled to the nightly job's targets)")
    p.add_argument("--world-size", type=WorldSize(), default=2, help="ranks of each run (default 2)")
    p.add_argument("--impl", action="append", default=None, help="implementations each run measures "
                                                                 "(default: reference)")
    p.add_argument("--threshold", type=Real(above=0, maximum=0.99, unit="a fraction"), default=0.05,
                   help="the smallest relative move that counts (default 0.05)")
    p.add_argument("--budget", type=Count(2, 50, unit="of runs", why="a decision needs 2 runs a side"), default=4,
                   help="the most runs of one commit (each beside a run of the good one) before it is unknown")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    p.add_argument("--out", type=OutFolder(), default=None,
                   help="also write bisection.json and bisection.md into this folder")
    return p


def measurement(args) -> Measurement:
    command = (tuple(shlex.split(args.command)) if args.command else
               default_command(args.benchmark, args.rounds, args.world_size, args.impl or ["reference"]))
    return Measurement(command, args.metric)


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.command is not None and "{out}" not in args.command:
        p.error(f"--command: got {args.command!r}, but should name {{out}}, the runs root it writes a run into")
    if not (args.repo / ".git").exists():
        p.error(f"--repo: got {str(args.repo)!r}, but should be a git checkout (a folder holding .git)")
    try:
        resolve(args.repo, args.good, args.bad)
    except BisectError as exc:
        p.error(str(exc))
    reproduce = ("python", "-m", "reports.bisect", *(sys.argv[1:] if argv is None else argv))
    try:
        found = bisect(args.repo, args.good, args.bad, measurement(args), args.threshold, args.budget,
                       reproduce, say=lambda line: print(f"[bisect] {line}", file=sys.stderr, flush=True))
    except BisectError as exc:
        print(f"python -m reports.bisect: {exc}", file=sys.stderr)
        return 2
    if args.out is not None:
        save(found, args.out)
    print(json.dumps(to_json(found), indent=1) if args.json else text(found))
    return 0 if found.outcome in ("found", "no move") else 1


if __name__ == "__main__":
    raise SystemExit(interruptible(main, "the worktrees were removed; nothing else was written"))
