"""Does the nightly gate cry wolf, and does it catch a real regression? Measured, not asserted.

``python -m selfcheck.gate_check`` runs the main job's benchmarks (no suites:
their counts are exact) several times back to back on this machine and:

1. **identical code**: compares every pair of ``--runs`` runs of the same
   commit. Target: no gated regression, and at most 1% of all metrics
   flagged (a regression or an improvement);
2. **a real regression**: ``--tries`` times, runs the overlap and step-time
   benchmarks for the reference, then for ``fixtures/slowed_reference.py``
   (the reference plus 10 ms per step, under the reference's name), and
   compares the two. Target: the reference's step-time ratio and its
   emulated overlap efficiency flagged as regressions in every try;
3. **sensitivity**: ``--tries`` times, measures the reference's step time,
   then slows it by 2.5%, 5%, 10% and 20% of that step (or ``--slowdown F``, repeatable) and
   compares each with the normal run: the share of tries in which the gate
   flags the step-time ratio, per slowdown, and what each run cost. The
   ratio's gate rule (``benchmarks.sampling.GATE_RULES``: threshold 3%,
   rounds sampled to a ±2% interval) is meant to pass over 2.5% and catch 5%;
4. **change points**: the trend's detector against others on series of
   nights drawn from the recorded runs' real rounds with planted steps
   (``selfcheck.detectors``; no benchmark runs, seconds);
5. **bisect**: ``--tries`` times per slowdown (10%, then 5% of the
   reference's measured step), a copy of this project with 16 commits, one
   of which slows the reference's step and one of which does not import,
   bisected with ``python -m reports.bisect``'s search on the step ratio:
   whether it names the slow commit, names the broken one as skipped, and
   how many benchmark runs it spent (``selfcheck.planted``).

Every run samples as the nightly job does, each benchmark within its time
budget; ``--budget BENCHMARK=SECONDS`` (repeatable) changes one, to see what
a larger budget buys. It is a benchmark, not a test: it takes most of an hour
on 2 cores, and its figures belong in docs/measurements/gate.md (the latest curve in
the README), with the date, the commit and the machine.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from benchmarks.settings import BUDGETS
from cli import Count, KeyNumber, OutFolder, Parser, Real, interruptible
from fixtures.slowed_reference import SLOWDOWN_ENV
from ranks.capacity import WorldSize

from reports.comparison.changes import compare_metrics
from reports.bisect.measure import Measurement, default_command
from .planted import BROKEN_AT, COMMITS, SLOW_AT, planted_history, step_delay
from reports.bisect.search import bisect
from .detectors import NIGHTS, measure, rows
from reports.render.table import table
from reports.store.runs import Runs, load_results


def compare_runs(old: Path, new: Path):
    """Every metric's change between two run directories."""
    return compare_metrics(load_results(old).metrics, load_results(new).metrics)

ROOT = Path(__file__).resolve().parent.parent
SLOWED = "fixtures.slowed_reference"
STEP_RATIO = "step_time/reference/ratio_to_torch_ddp"
MUST_FLAG = (STEP_RATIO, "overlap/emulated/reference/efficiency")
FLAGGED = ("regression", "improvement")
SLOWDOWNS = (0.025, 0.05, 0.10, 0.20)
PARTS = ("identical", "slowed", "sensitivity", "changepoints", "bisect")
BISECT_SLOWDOWNS = (0.10, 0.05)
BISECT_THRESHOLD = 0.03
"""The step ratio's gate rule threshold (``benchmarks.sampling.GATE_RULES``)."""


@dataclass(frozen=True)
class MainJob:
    """How every run of the main job is started: ``python -m reports --no-suites`` at ``world_size`` ranks, with
    the ``--budget`` and ``--launches`` arguments the gate check was given."""

    world_size: int
    budgets: tuple[str, ...] = ()
    launches: int | None = None

    def run(self, out: Path, *args: str, slowdown_ms: float | None = None) -> Timed:
        before = set(Runs(out).names())
        command = [sys.executable, "-m", "reports", "--no-suites", "--out", str(out),
                   "--world-size", str(self.world_size), *(f"--budget={b}" for b in self.budgets),
                   *(("--launches", str(self.launches)) if self.launches else ()), *args]
        env = {**os.environ, **({SLOWDOWN_ENV: f"{slowdown_ms:.6g}"} if slowdown_ms is not None else {})}
        print(f"[gate check] {' '.join(command[1:])}" + (f" ({SLOWDOWN_ENV}={slowdown_ms:.3g})"
                                                         if slowdown_ms is not None else ""),
              file=sys.stderr, flush=True)
        start = time.monotonic()
        subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env=env)
        (new,) = set(Runs(out).names()) - before
        return Timed(out / new, time.monotonic() - start)


@dataclass(frozen=True)
class Timed:
    """One run of the main job: its directory, and how long it took."""

    path: Path
    seconds: float


def identical(job: MainJob, out: Path, runs: int) -> list[dict]:
    done = [job.run(out / "identical") for _ in range(runs)]
    rows = []
    for old, new in itertools.combinations(done, 2):
        changes = compare_runs(old.path, new.path)
        flagged = [c for c in changes if c.status in FLAGGED]
        rows.append({"old": old.path.name, "new": new.path.name, "metrics": len(changes),
                     "run (s)": f"{old.seconds:.0f}, {new.seconds:.0f}",
                     "gated regressions": sum(c.gated and c.status == "regression" for c in changes),
                     "flagged": len(flagged), "flagged %": round(100 * len(flagged) / len(changes), 2),
                     "which": ", ".join(f"{c.key} ({c.status})" for c in flagged)})
    return rows


def slowed(job: MainJob, out: Path, tries: int) -> list[dict]:
    rows = []
    for attempt in range(tries):
        where = out / f"slowed-{attempt}"
        bench = ("--benchmark", "overlap", "--benchmark", "step_time")
        normal = job.run(where, "--impl", "reference", *bench)
        slow = job.run(where, "--impl", SLOWED, *bench)
        changes = {c.key: c for c in compare_runs(normal.path, slow.path)}
        rows.append({"try": attempt + 1, **{key: f"{changes[key].status} ({_move(changes[key])}, "
                                                 f"p {changes[key].p_adjusted:.2g})" for key in MUST_FLAG},
                     "caught": all(changes[k].status == "regression" for k in MUST_FLAG)})
    return rows


def sensitivity(job: MainJob, out: Path, tries: int, slowdowns: tuple[float, ...] = SLOWDOWNS) -> list[dict]:
    """Per try and slowdown: the reference's step slowed by that share of its own measured step, against it."""
    rows = []
    bench = ("--benchmark", "step_time")
    for attempt in range(tries):
        where = out / f"sensitivity-{attempt}"
        normal = job.run(where, "--impl", "reference", *bench)
        step_ms = next(r.impl_ms.median for r in load_results(normal.path).benchmarks.step_time
                       if r.impl == "reference")
        for share in slowdowns:
            slow = job.run(where, "--impl", SLOWED, *bench, slowdown_ms=share * step_ms)
            change = {c.key: c for c in compare_runs(normal.path, slow.path)}[STEP_RATIO]
            sampling = load_results(slow.path).metrics[STEP_RATIO].sampling
            rows.append({"try": attempt + 1, "slowdown": share, "delay (ms)": round(share * step_ms, 3),
                         "step ratio": _move(change), "p": f"{change.p_adjusted:.2g}",
                         "caught": change.status == "regression", "rounds": sampling and sampling.rounds,
                         "target met": sampling and sampling.met, "run (s)": round(slow.seconds),
                         "normal run (s)": round(normal.seconds)})
    return rows


def detection_rates(rows: list[dict]) -> list[dict]:
    """Per slowdown: in how many tries the gate flagged it."""
    rates = []
    for share in sorted({r["slowdown"] for r in rows}):
        hits = [r["caught"] for r in rows if r["slowdown"] == share]
        seconds = [r["run (s)"] for r in rows if r["slowdown"] == share and "run (s)" in r]
        rates.append({"slowdown": f"{share:.1%}", "caught": f"{sum(hits)} of {len(hits)}",
                      "detection rate": f"{sum(hits) / len(hits):.0%}",
                      "seconds a run": f"{min(seconds)}-{max(seconds)}" if seconds else ""})
    return rates


def _move(change) -> str:
    if change.absolute:
        return f"{change.old:.3f} -> {change.new:.3f}"
    return f"{change.old:.3f} -> {change.new:.3f}, {change.relative:+.1%}"


def bisect_tries(job: MainJob, out: Path, tries: int, budget: int = 4) -> list[dict]:
    """Per slowdown and try: the planted history bisected, and what it found and cost."""
    normal = job.run(out / "bisect-normal", "--impl", "reference", "--benchmark", "step_time")
    step_ms = next(r.impl_ms.median for r in load_results(normal.path).benchmarks.step_time if r.impl == "reference")
    measurement = Measurement(default_command("step_time", None, job.world_size, ["reference"]), STEP_RATIO)
    rows = []
    for share in BISECT_SLOWDOWNS:
        for attempt in range(tries):
            repo = out / f"bisect-{share:g}-{attempt}"
            shutil.rmtree(repo, ignore_errors=True)
            repo.mkdir(parents=True)
            shas = planted_history(repo, ROOT, Path("reference/ddp.py"), step_delay(share * step_ms / 1e3))
            start = time.monotonic()
            found = bisect(repo, shas[1], shas[COMMITS], measurement, BISECT_THRESHOLD, budget,
                           say=lambda line: print(f"[gate check] {line}", file=sys.stderr, flush=True))
            named = [t.commit for t in found.skipped]
            rows.append({"slowdown": f"{share:.0%}", "try": attempt + 1, "delay (ms)": round(share * step_ms, 3),
                         "outcome": found.outcome, "right commit": found.first_moved == shas[SLOW_AT],
                         "broken one named": named == [shas[BROKEN_AT]], "runs": found.runs,
                         "commits measured": len(found.trials), "seconds": round(time.monotonic() - start)})
    return rows


def summary(same: list[dict] | None, slow: list[dict] | None, sensitive: list[dict] | None,
            detectors: list[dict] | None = None, bisections: list[dict] | None = None) -> str:
    """The summary of the parts that ran (None: that part was not asked for)."""
    sections = []
    if same is not None:
        gated = sum(r["gated regressions"] for r in same)
        worst = max((r["flagged %"] for r in same), default=0.0)
        sections += ["## Identical code, every pair of runs compared", table(same, numparse=False),
                     f"Gated regressions: {gated} (target 0). Largest share of metrics flagged in a pair: {worst}% "
                     "(target at most 1%)."]
    if slow is not None:
        caught = sum(r["caught"] for r in slow)
        sections += ["## The reference plus 10 ms per step, against the reference", table(slow, numparse=False),
                     f"Caught in {caught} of {len(slow)} tries (target: every try)."]
    if sensitive is not None:
        sections += ["## Sensitivity: the step slowed by a share of itself",
                     table(detection_rates(sensitive), numparse=False), table(sensitive, numparse=False)]
    if bisections is not None:
        sections += ["## Bisection of a planted slowdown (16 commits, one slower, one that does not import)",
                     table(bisections, numparse=False)]
    if detectors is not None:
        sections += [f"## Change points: {NIGHTS} nights a series, steps planted, each detector",
                     table(detectors, numparse=False)]
    return "\n\n".join(sections) + "\n"


def parser() -> Parser:
    p = Parser(prog="python -m selfcheck.gate_check", description=__doc__)
    p.add_argument("--out", type=OutFolder("the check's folder"), default=ROOT / "reports" / "gate_check",
                   help="where the runs and the summary go (default reports/gate_check)")
    p.add_argument("--runs", type=Count(2), default=3, help="identical runs (default 3)")
    p.add_argument("--tries", type=Count(1), default=3, help="slowed-against-normal tries (default 3)")
    p.add_argument("--world-size", type=WorldSize(1), default=2)
    p.add_argument("--budget", action="append", default=[], metavar="BENCHMARK=SECONDS",
                   type=KeyNumber(f"BENCHMARK=SECONDS with BENCHMARK one of {', '.join(BUDGETS)} and SECONDS "
                                  "above 0", keys=tuple(BUDGETS), positive=True),
                   help="repeatable: handed to every run of the main job (its sampling budget for a benchmark)")
    p.add_argument("--launches", type=Count(1, unit="of launches"),
                   help="handed to every run of the main job: the launches its step-time rounds are shared among "
                        "(default: the main job's)")
    p.add_argument("--slowdown", action="append", type=Real(above=0, maximum=1, unit="a fraction"),
                   help="sensitivity: a share of the step to slow it by, repeatable (default: "
                        + ", ".join(f"{s:g}" for s in SLOWDOWNS) + ")")
    p.add_argument("--series", type=Count(1, 10000, unit="of series"), default=100,
                   help="change points: series per planted step (default 100)")
    p.add_argument("--part", action="append", choices=PARTS,
                   help="run only this part, repeatable (default: all of " + ", ".join(PARTS) + ")")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.budget = [f"{name}={seconds:g}" for name, seconds in args.budget]
    job = MainJob(args.world_size, tuple(args.budget), args.launches)
    parts = args.part or PARTS
    same = identical(job, args.out, args.runs) if "identical" in parts else None
    slow = slowed(job, args.out, args.tries) if "slowed" in parts else None
    sensitive = (sensitivity(job, args.out, args.tries, tuple(args.slowdown or SLOWDOWNS))
                 if "sensitivity" in parts else None)
    detectors = rows(measure(args.series)) if "changepoints" in parts else None
    bisections = bisect_tries(job, args.out, args.tries) if "bisect" in parts else None
    text = summary(same, slow, sensitive, detectors, bisections)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gate_check.md").write_text(text)
    figures = {"identical": same, "slowed": slow, "sensitivity": sensitive, "changepoints": detectors,
               "bisect": bisections}
    (args.out / "gate_check.json").write_text(json.dumps({k: v for k, v in figures.items() if v is not None},
                                                         indent=2) + "\n")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(interruptible(main, "stopped; the runs it finished are kept under --out"))
