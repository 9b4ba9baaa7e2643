"""The main job: benchmarks, conformance suites and hardware, written as one report run.

``python -m reports`` (what ``tox -e report`` runs) writes
``reports/runs/<UTC start time>/`` with ``report.md``, ``results.json``
(reports/schema.md) and PNG plots, points ``reports/runs/latest`` at it, and
compares it with the newest earlier run of the same setup (the nightly gate,
``reports.comparison``).

Data flows one way: the benchmarks and the suites measure; ``store`` holds
the run's typed results; ``comparison`` judges it (against earlier runs, the
design notes' claims, the verdict), once, and the judgement is stored with
it; ``render`` writes report.md and the plots from the stored results alone,
as ``python -m reports.render`` does again later.

Everything the job can check is checked before it starts (``reports.nightly.preflight``);
a run that cannot be written where asked is saved in a fallback place, named.

Under ``torchrun`` every rank of every node joins the multi-rank benchmarks
(NCCL on GPUs), each node's first rank describes its node, then every rank
leaves the group; rank 0 alone goes on to the single-process benchmarks, the
suites and the strength runs (each a child process with a clean environment
and ``--world-size`` ranks of its own) and writes the run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Sequence

from benchmarks import BENCHMARKS
from benchmarks.measuring.padding import overhead_table
from benchmarks.settings import BUDGETS, DEFAULT_PEERS, INFORMATIVE_ROUNDS, LAUNCHES, BenchSettings
from benchmarks.suite import run_rank_benchmarks, run_single_process_benchmarks
from cli import Count, KeyNumber, OutFolder, Parser, Real
from datamodel import from_json
from ranks import launched_by_torchrun
from ranks.joining import pick_backend, tensors_on
from ranks.launch import leave_torchrun
from ranks.startup import DEVICE_ENV, DEVICES
from suites.multigpu.records import Coverage, Exploration

from ..comparison.changes import ALPHA, DEFAULT_THRESHOLD, compare
from ..comparison.claims import judge_claims
from ..comparison.comparable import previous_comparable
from ..comparison.series import trend
from ..comparison.verdict import REFERENCE, covered, decide
from ..conformance.records import MEASURED, StrengthMeasured, StrengthPhase, StrengthRecord, SuiteRun
from ..conformance.suites import child_environment, multigpu, run_suite, run_suites
from ..render.report import build_report, draw_plots
from ..store.bisection import Bisection
from ..store.metrics import collect_metrics
from ..store.model import DIRTY, SCHEMA, Comparison, Records, Results, Run, decode, encode, setup_of
from ..store.mutation_score import read_score
from ..store.runs import DEFAULT_ROOT, RunError, Runs, dump_json, fallback_root
from .clock import Clock, earlier_phases, first_run_plan, fit_to_deadline
from .preflight import DEFAULT_SUITES, preflight

DEADLINE_MINUTES = 19.0
"""The job's own time, its env's install aside (about 40 s from a fresh clone): the benchmarks and the suites run
whole; the search and the strength phase take what is left (``clock.fit_to_deadline``), so a slow night ends on
time with less searched, and says so."""
STRENGTH_SECONDS = 60.0
"""The strength phase's budget for measuring: a share of the catalogue a night (about six entries), the rest carried
over; the entry that passes it runs to its end (at 90 the phase took 121 s: docs/measurements/benchmarks.md)."""
STRENGTH_MODULE = "selfcheck.strength"

EXPLORE_SECONDS = 60.0
"""Seconds the nightly search of each implementation the verdict covers may take, confirming and shrinking
included."""
UNCOVERED_SHARE = 1 / 6
"""The share of those seconds an implementation the verdict does not cover gets: its findings are reported, not
failed, and its own suites ran its compositions in the suites phase; six peers at a minute each would be most of
the job's time (at a third, the search phase took 257 s of a 1,377 s job: docs/measurements/benchmarks.md)."""
PEERS_A_NIGHT = 3
"""Peers the search visits a night, in turn from night to night (all of them where there are no more): a search
session costs its start and its last composition besides its seconds, about 8 s of the 18 a peer's took, so six
peers every night spent 110 s of the job on mostly starting up."""
SMOKE_EXPLORE_SECONDS = 5.0
EXPLORE_COMPOSITIONS = 100_000
"""Compositions the nightly search may run: more than its seconds allow, so the seconds decide."""
TREND_RUNS = 20
"""Runs of the setup a report's trend shows (the site shows the whole history)."""
ROOT = Path(__file__).resolve().parents[2]


def progress(message: str) -> None:
    print(f"[report {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parser() -> Parser:
    parser = Parser(prog="python -m reports", description=__doc__)
    parser.add_argument("--impl", action="append",
                        help="repeatable: an implementation the job checks with the suites and, where it has the ddp "
                             "level, benchmarks side by side, and whose failures and new findings fail the verdict "
                             f"(default: the reference, with the peers {', '.join(DEFAULT_PEERS)})")
    parser.add_argument("--peer", action="append",
                        help="repeatable: an implementation run beside those of --impl, whose failures and new "
                             "findings are reported, never failed: a peer you do not maintain (default: none when "
                             f"--impl is given, else {', '.join(DEFAULT_PEERS)})")
    parser.add_argument("--suite", action="append", help=f"repeatable (default: {', '.join(DEFAULT_SUITES)})")
    parser.add_argument("--benchmark", action="append",
                        help=f"repeatable (default: all: {', '.join(b.name for b in BENCHMARKS)})")
    parser.add_argument("--out", type=OutFolder("the runs' folder"), default=DEFAULT_ROOT,
                        help="directory holding the runs")
    parser.add_argument("--pytest-arg", action="append", default=[], help="passed on to each suite run")
    parser.add_argument("--world-size", type=Count(1), default=2,
                        help="ranks the suites spawn, and the benchmarks' ranks when not under torchrun (default 2; "
                             "1 on a node with one GPU)")
    parser.add_argument("--allow-world-size", action="store_true",
                        help="spawn --world-size ranks even past what this machine's cores and memory hold")
    parser.add_argument("--device", choices=DEVICES, default=os.environ.get(DEVICE_ENV, "auto"),
                        help="where the ranks' tensors live: auto (NCCL on CUDA where every rank has a GPU of its "
                             "own, else gloo on the CPU), cpu (gloo), or cuda (NCCL where every rank has a GPU, "
                             "else gloo over CUDA tensors, ranks sharing the GPUs: a setup of its own); the suites "
                             f"get the same (default: ${DEVICE_ENV} or auto)")
    parser.add_argument("--rounds", type=Count(1),
                        help="a fixed number of rounds for every figure (default: the gated figures' rounds are "
                             "calibrated to their targets within each benchmark's budget, the others get "
                             f"{INFORMATIVE_ROUNDS})")
    parser.add_argument("--budget", type=KeyNumber(f"BENCHMARK=SECONDS with BENCHMARK one of {', '.join(BUDGETS)} and "
                                                   "SECONDS above 0", keys=tuple(BUDGETS), positive=True),
                        action="append", default=[], metavar="BENCHMARK=SECONDS",
                        help="repeatable: seconds of calibrated rounds for a benchmark with gated figures (defaults: "
                             + ", ".join(f"{k}={v:g}" for k, v in BUDGETS.items()) + ")")
    parser.add_argument("--launches", type=Count(1, unit="of launches"), default=LAUNCHES,
                        help="sets of fresh rank processes the step-time rounds are shared among, each carrying on "
                             f"the rounds of those before it (default {LAUNCHES}; 1 in smoke mode; more is refused under "
                             "torchrun, which starts the ranks once): one process has a level of its own that more "
                             "rounds in it do not average away")
    parser.add_argument("--busbw-max-bytes", type=Count(1024, unit="of bytes", why="the sweep's smallest size"),
                        help="largest bucket of the bus-bandwidth sweep (default 16 MiB on gloo, 1 GiB on NCCL)")
    parser.add_argument("--smoke", action="store_true", help="each benchmark once on tiny inputs; no timing")
    parser.add_argument("--threshold", type=Real(above=0, maximum=1, unit="a fraction"), default=DEFAULT_THRESHOLD,
                        help="relative change that counts, with significance (default 10%%)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 1 when a gated metric regressed against the previous run")
    parser.add_argument("--gate", action="append", default=[], metavar="PREFIX",
                        help="repeatable: gate informative metrics whose key starts with PREFIX too "
                             "(e.g. busbw_largest/ on a dedicated GPU node)")
    parser.add_argument("--bisect", action="store_true",
                        help="when the gate finds a gated regression, find the commit between the previous run's and "
                             "this one's that moved it (python -m reports.bisect; written into the run's folder)")
    parser.add_argument("--no-suites", action="store_true", help="benchmarks only: no conformance runs")
    parser.add_argument("--no-site", action="store_true",
                        help="do not rebuild the static site beside --out after the run (python -m reports.website)")
    parser.add_argument("--no-strength", action="store_true",
                        help="skip the suite-strength runs of the broken implementations (skipped in smoke mode)")
    parser.add_argument("--strength-seconds", type=Real(above=0, unit="seconds"), default=STRENGTH_SECONDS,
                        metavar="SECONDS",
                        help="seconds the suite-strength phase may spend measuring broken implementations, those "
                             "never measured first, then the longest ago; the others' rows are carried over from the "
                             f"runs that measured them, which the rows name (default {STRENGTH_SECONDS:g})")
    parser.add_argument("--explore-seconds", type=Real(above=None, minimum=0, unit="seconds"), default=None,
                        metavar="SECONDS",
                        help="seconds the search past the multi-rank suite's covering arrays may take for each "
                             "implementation the verdict covers, confirming and shrinking included (pytest "
                             f"suites/multigpu --explore; default {EXPLORE_SECONDS:g}, {SMOKE_EXPLORE_SECONDS:g} in "
                             "smoke mode; 0: no search); other implementations get a sixth of it, "
                             f"{PEERS_A_NIGHT} a night in turn; its example database lives in the runs root "
                             "(.explore/), so each night tries the failures found before first")
    parser.add_argument("--deadline", type=Real(above=None, minimum=0, unit="minutes"), default=DEADLINE_MINUTES,
                        metavar="MINUTES",
                        help="minutes the job may take: the benchmarks and the suites run whole, then the search "
                             "and the strength phase take what is left, the peers' searches cut first, then the "
                             "strength phase, then the covered searches' seconds; each cut is said (default "
                             f"{DEADLINE_MINUTES:g}; 0: none)")
    parser.add_argument("--explore-seed", type=Count(0, unit="", why="hypothesis' seed"), default=None, metavar="N",
                        help="the search's seed (default: one taken from the project's commit, so the same code, "
                             "versions and budget draw the same compositions; the date outside a git checkout); the "
                             "report prints it with the command that reruns each search")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser_ = parser()
    args = parser_.parse_args(argv)
    problem = preflight(args)
    if problem:
        parser_.error(problem)
    return args


def implementations(args) -> tuple[str, ...]:
    """What the job runs: those asked for (--impl, else the reference) and the peers (--peer; by default, when
    neither is given, `DEFAULT_PEERS`)."""
    peers = args.peer if args.peer is not None else () if args.impl else DEFAULT_PEERS
    return tuple(dict.fromkeys([*(args.impl or [REFERENCE]), *peers]))


def covered_by(args) -> tuple[str, ...]:
    """The implementations the verdict covers: those asked for (--impl), else the reference; the reference
    whenever it runs."""
    return covered(args.impl, implementations(args))


def bench_settings(args, backend: str) -> BenchSettings:
    impls = implementations(args)
    settings = BenchSettings.for_backend(backend, args.busbw_max_bytes, rounds=args.rounds, impls=impls,
                                         budgets={**BUDGETS, **dict(args.budget)},
                                         launches=args.launches)
    return settings.smoked() if args.smoke else settings


def run_conformance(args) -> list[SuiteRun]:
    """Every suite against every implementation: one pytest session per implementation (its import and the
    interpreter paid once), the runs listed suite by suite."""
    suites = list(args.suite or DEFAULT_SUITES)
    results = []
    for impl in implementations(args):
        progress(f"running {', '.join(suites)} against {impl} ({args.world_size} ranks)")
        with tempfile.TemporaryDirectory() as tmp:
            coverage = Path(tmp) / "compositions.json"
            composes = [f"--compositions-report={coverage}"] if any(multigpu(s) for s in suites) else []
            runs = run_suites(suites, impl, [f"--device={args.device}", *composes, *args.pytest_arg],
                              world_size=args.world_size, allow_world_size=args.allow_world_size)
            if coverage.exists():
                found = from_json(Coverage, json.loads(coverage.read_text()))
                runs = [replace(r, compositions=found) if multigpu(r.suite) else r for r in runs]
        for result in runs:
            progress(f"  {result.suite}: {result.passed} passed, {result.failed + result.errors} failed, "
                     f"{result.skipped} skipped in {result.seconds:.1f}s")
        results += runs
    return sorted(results, key=lambda r: suites.index(r.suite))


def search_budgets(args, covers: Sequence[str], night: date) -> dict[str, float]:
    """Each implementation's search seconds: ``--explore-seconds`` for those the verdict covers, every night; a
    sixth of it for ``PEERS_A_NIGHT`` of the others, in turn by ``night``; none where there is no search."""
    seconds = args.explore_seconds if args.explore_seconds is not None else (
        SMOKE_EXPLORE_SECONDS if args.smoke else EXPLORE_SECONDS)
    if not seconds or args.no_suites or not any(multigpu(s) for s in args.suite or DEFAULT_SUITES):
        return {}
    return {impl: seconds if impl in covers else max(round(seconds * UNCOVERED_SHARE, 1), 0.1)
            for impl in implementations(args) if impl in covers or impl in peers_tonight(args, covers, night)}


def peers_tonight(args, covers: Sequence[str], night: date) -> tuple[str, ...]:
    """The peers whose turn at the search ``night`` is: ``PEERS_A_NIGHT`` at most, the next ones the night after, so
    that each is searched every ``ceil(peers / PEERS_A_NIGHT)`` nights."""
    peers = [impl for impl in implementations(args) if impl not in covers]
    turns = max(math.ceil(len(peers) / PEERS_A_NIGHT), 1)
    turn = night.toordinal() % turns
    return tuple(peer for i, peer in enumerate(peers) if i % turns == turn)


def run_exploration(args, budgets: dict[str, float], seed: int) -> list[Exploration]:
    """Each implementation's search past the covering arrays, for its seconds, drawing from ``seed``; one that
    cannot run the multi-rank suite (no ddp level) writes nothing and is left out."""
    found = []
    for impl, seconds in budgets.items():
        progress(f"searching past the covering arrays against {impl} ({seconds:g} s, seed {seed})")
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "exploration.json"
            run_suite("suites/multigpu", impl, [f"--device={args.device}", f"--explore={EXPLORE_COMPOSITIONS}",
                                                f"--explore-seconds={seconds:g}", f"--explore-seed={seed}",
                                                f"--explore-report={report}", f"--explore-db={args.out / '.explore'}",
                                                *args.pytest_arg],
                      allow_world_size=args.allow_world_size)
            if report.exists():  # named as asked: the spec reruns it, where a wrapper's own name may not
                found.append(replace(from_json(Exploration, json.loads(report.read_text())), impl=impl))
                progress(f"  {impl}: {len(found[-1].findings)} findings in {found[-1].runs} runs")
    return found


def search_seed(revision: str | None, day: datetime) -> int:
    """The search's seed: from the commit, so that the same code draws the same compositions; from the day outside
    a git checkout."""
    if revision:
        return int(hashlib.sha256(revision.encode()).hexdigest()[:8], 16)
    return int(day.strftime("%Y%m%d"))


def run_strength(seconds: float, root: Path) -> tuple[tuple[StrengthRecord, ...], StrengthPhase | None]:
    """The strength phase, a child process of the project's checks of itself (``selfcheck.strength``): the
    catalogue's rows, those not measured tonight carried over from the newest run under ``root`` that has them.
    A phase that fails leaves the run without rows, said; it never costs the run."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-m", STRENGTH_MODULE, "--seconds", repr(seconds), "--root", str(root),
                               "--out", tmp], cwd=ROOT, env=child_environment())
        try:
            measured = from_json(StrengthMeasured, json.loads((Path(tmp) / MEASURED).read_text()))
        except (OSError, ValueError) as exc:
            progress(f"the strength phase ended with exit code {done.returncode} and no rows ({exc}): this run "
                     "has no strength rows")
            return (), None
    return measured.rows, measured.phase


def commit() -> str | None:
    """The project's commit, '+dirty' when the tree has changes; None outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + (DIRTY if dirty.stdout.strip() else "")


def judged(results: Results, runs: Runs, args) -> Results:
    """The run with what is decided about it: the comparison with the previous run of its setup, the trend it
    continues, the design notes' claims, and the verdict."""
    try:
        previous, passed = previous_comparable(runs, results)
        comparison = compare(previous and previous.run.name, previous and previous.metrics, results.metrics, passed,
                             args.threshold, gate=args.gate)
        history = [r for r in runs.readable() if r.run.setup == results.run.setup]
    except RunError as exc:
        comparison = Comparison(None, (), args.threshold, ALPHA, (), str(exc))
        history = []
    results = replace(results, comparison=comparison, claims=judge_claims(results),
                      trend=tuple(trend([*history, results], last=TREND_RUNS)))
    return replace(results, verdict=decide(results, args.fail_on_regression, covered_by(args)))


def texts(results: Results) -> dict[str, str]:
    """The run's results.json and its report, rendered from the results as they read back (so a rebuild gives
    the same report)."""
    text = dump_json(encode(results))
    return {"report.md": build_report(decode(json.loads(text))), "results.json": text}


def add_bisection(written: Path, found: Bisection) -> None:
    """The written run with its bisection, as the store reads it back (its plots and all), and its report
    rendered again."""
    store = Runs(written.parent)
    store.rewrite(written.name, texts(replace(store.load(written.name), bisection=found)))


def save(results: Results, runs: Runs) -> Path:
    """Write the run: its results, the report and the plots drawn from the results as they read back (so a
    rebuild gives the same report); into a fallback place, named, when ``runs`` cannot take it."""
    files: dict[str, str | bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        written = draw_plots(_read_back(results), Path(tmp))
        results = replace(results, plots=tuple(p.relative_to(tmp).as_posix() for p in written))
        for rel in results.plots:
            files[rel] = (Path(tmp) / rel).read_bytes()
    files.update(texts(results))
    try:
        return runs.write(results.run.name, files)
    except OSError as exc:
        fallback = Runs(fallback_root())
        progress(f"could not write the run into {runs.root} ({exc}); saving it into {fallback.root} instead")
        return fallback.write(results.run.name, files)


def _read_back(results: Results) -> Results:
    """The results as a reader of the written file will see them."""
    return decode(json.loads(dump_json(encode(results))))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    start = datetime.now(timezone.utc)
    torchrun = launched_by_torchrun()
    rank = int(os.environ["RANK"]) if torchrun else 0
    world_size = int(os.environ["WORLD_SIZE"]) if torchrun else args.world_size
    if rank != 0:
        return _run(args, "", torchrun, rank, world_size, _command(torchrun, argv))
    with Runs(args.out).reserve(start) as name:
        return _run(args, name, torchrun, rank, world_size, _command(torchrun, argv))


def _run(args, name: str, torchrun: bool, rank: int, world_size: int, command: list[str]) -> int:
    began = time.monotonic()
    backend = pick_backend(int(os.environ.get("LOCAL_WORLD_SIZE", world_size)), args.device)
    settings = bench_settings(args, backend)
    say = progress if rank == 0 else lambda _: None
    runs = Runs(args.out)
    budgets = search_budgets(args, covered_by(args), datetime.now(timezone.utc).date())
    strength = not (args.smoke or args.no_strength or args.no_suites)
    clock = _clock(args, runs, world_size, settings, budgets, strength) if rank == 0 else None
    if clock:
        clock.phase("benchmarks", "benchmarks")
    bench = run_rank_benchmarks(settings, world_size, args.benchmark, say, device=args.device)
    if torchrun:
        leave_torchrun()
    if rank != 0:
        return 0
    single = run_single_process_benchmarks(settings, args.benchmark, progress)
    faults = (*bench.pop("faults"), *single.pop("faults"))
    bench.update(single)
    conformance, explorations, strength_rows, strength_phase = [], [], (), None
    if not args.no_suites:
        clock.phase("suites", "suites against every implementation")
        conformance = run_conformance(args)
    revision = commit()
    seed = args.explore_seed if args.explore_seed is not None else search_seed(revision, datetime.now(timezone.utc))
    strength_seconds = args.strength_seconds if strength else None
    waiting = [impl for impl in implementations(args) if budgets and impl not in budgets]
    if waiting:
        progress(f"the peers take turns at the search; not tonight: {', '.join(waiting)}")
    if args.deadline:
        fitted = fit_to_deadline(args.deadline * 60 - (time.monotonic() - began), budgets, covered_by(args),
                                 strength_seconds)
        if fitted.cuts:
            progress(f"to end within {args.deadline:g} min: {'; '.join(fitted.cuts)}")
        budgets, strength_seconds = fitted.search, fitted.strength
    if budgets:
        clock.phase("search", "searching past the covering arrays")
        explorations = run_exploration(args, budgets, seed)
    if strength_seconds is not None:
        clock.phase("strength", f"suite strength: broken implementations for up to {strength_seconds:g} s")
        strength_rows, strength_phase = run_strength(strength_seconds, runs.root)
    phases = clock.times()  # judging and writing the run cannot time itself into it
    clock.phase("report", "judging and writing the run")
    nodes = bench.pop("nodes")
    tensors = tensors_on(backend, args.device)
    mode = "torchrun" if torchrun else "plain"
    run = Run(name=name, host=platform.node() or "unknown",
              setup=setup_of(backend, tensors, world_size, mode, args.smoke,
                             [(n.devices, n.host.cpu_model) for n in nodes]),
              commit=revision, command=tuple(command))
    records = Records(**{name_: tuple(rows) for name_, rows in bench.items()})
    results = Results(schema=SCHEMA, run=run, settings=settings, nodes=tuple(nodes), conformance=tuple(conformance),
                      suite_world_size=None if args.no_suites else args.world_size, strength=strength_rows,
                      explorations=tuple(explorations),
                      benchmarks=records, overhead=tuple(overhead_table()), metrics={}, comparison=None, trend=(),
                      claims=(), mutation=read_score(), verdict=None, plots=(), strength_phase=strength_phase,
                      phases=phases, benchmark_faults=faults)
    results = judged(replace(results, metrics=collect_metrics(results)), runs, args)
    written = save(results, runs)
    print((written / "report.md").read_text())
    progress(f"wrote {written}/report.md")
    if args.bisect:
        from ..bisect.regression import bisect_regression

        found = bisect_regression(results, runs, implementations(args), progress)
        if found is not None:
            add_bisection(written, found)
            progress(f"added the bisection to {written}/results.json and report.md")
    if not args.no_site:
        publish_site(Runs(written.parent))
    return results.verdict.exit_code


def _clock(args, runs: Runs, world_size: int, settings: BenchSettings, budgets: dict[str, float],
           strength: bool) -> Clock:
    """The progress lines' clock: each phase that will run, planned as long as the newest earlier run of this kind
    that timed its phases took for it, else estimated from the budgets."""
    benchmarks = sum(v for k, v in settings.budgets.items() if args.benchmark is None or k in args.benchmark)
    plan = first_run_plan(benchmarks, 0 if args.no_suites else len(implementations(args)),
                          sum(budgets.values()), len(budgets), args.strength_seconds if strength else None)
    found = earlier_phases(runs, world_size, args.smoke)
    if found is None:
        return Clock(plan, "estimated from the budgets: no earlier run of this kind timed its phases", progress)
    name, seconds = found
    return Clock({phase: seconds.get(phase, estimate) for phase, estimate in plan.items()},
                 f"as run {name} took", progress)


def publish_site(runs: Runs) -> None:
    """The site beside the runs, rebuilt with this run in it; a site that cannot be written is a warning line,
    never the failure of a run that is already written."""
    try:
        from ..website.build import build_site, site_beside

        built = build_site(runs, site_beside(runs))
        progress(f"wrote the site: {built.out}/index.html")
    except Exception as exc:  # noqa: BLE001 - whatever the site meets, the run stands
        progress(f"warning: the site was not written ({type(exc).__name__}: {exc}); the run is kept")


def _command(torchrun: bool, argv: Sequence[str] | None) -> list[str]:
    """How this run was started, as a user would type it again."""
    args = list(sys.argv[1:] if argv is None else argv)
    if torchrun:
        return ["torchrun", f"--nproc-per-node={os.environ.get('LOCAL_WORLD_SIZE', '?')}",
                f"--nnodes={int(os.environ.get('WORLD_SIZE', 1)) // max(1, int(os.environ.get('LOCAL_WORLD_SIZE', 1)))}",
                "-m", "reports", *args]
    return ["python", "-m", "reports", *args]
