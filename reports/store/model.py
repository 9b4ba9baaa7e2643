"""The results of one run, typed: what ``results.json`` holds, what every reader reads.

A run is written once, by ``reports.nightly.job``, as ``Results``; ``load_results``
(``reports.store.runs``) reads any run this project ever wrote into the
current ``Results`` (older schemas are upgraded there, and only there). Every
field carries its meaning, and ``reports/schema.md`` is generated from them.

The benchmarks' own records are theirs (``benchmarks.*``: one frozen
dataclass each); the conformance runs are ``reports.conformance``'s. What is
decided about a run (its comparison with the previous run of its setup, the
trend it continues, the design notes' claims, the verdict) is decided once,
when it is written, and stored here, so a report is rebuilt from
``results.json`` alone (``python -m reports.render``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from benchmarks import BENCHMARKS
from benchmarks.padding import OverheadRow
from benchmarks.registry import BenchmarkFault, Better, Metric
from benchmarks.settings import BenchSettings
from benchmarks.stats import Summary
from datamodel import doc, from_json, to_json
from hardware.node import Backend, Node
from suites.multigpu.records import Exploration

from ..conformance.records import StrengthPhase, StrengthRecord, SuiteRun
from .bisection import Bisection

SCHEMA = 12
METHOD = 4
"""How the benchmarks measure; raised whenever a figure is taken differently (4: rounds calibrated to targets,
impossible and noise-bound figures refused)."""


@dataclass(frozen=True)
class Setup:
    """What two runs must share to be compared: a figure measured on eight GPUs over NVLink says nothing about
    one measured on two CPU ranks over gloo."""

    backend: Backend = doc("gloo or nccl")
    tensors: Literal["cuda", "cpu"] = doc("cuda or cpu: where the ranks' tensors lived (gloo over cuda is a setup of its own)")
    world_size: int = doc("ranks of the benchmarks")
    mode: Literal["plain", "torchrun"] = doc("plain (spawned ranks) or torchrun")
    nodes: int = doc("nodes the ranks ran on")
    devices: tuple[str, ...] = doc("what the nodes compute on: their GPUs by name and count, or the CPU model")
    smoke: bool = doc("a smoke run: each benchmark once on tiny inputs, timings meaning nothing")
    method: int = doc(f"how the benchmarks measure (now {METHOD}); raised whenever a figure is taken differently")

    def label(self) -> str:
        """One line naming the setup, e.g. 'nccl, 8 ranks, torchrun, 1 node, 8 x NVIDIA H100'; a backend whose
        tensors are not where it usually keeps them is named with them: 'gloo over cuda'."""
        backend = self.backend if self.tensors == usual_tensors(self.backend) else f"{self.backend} over {self.tensors}"
        method = f", method {self.method}" if self.method != METHOD else ""
        return (f"{backend}, {self.world_size} rank{'s' if self.world_size != 1 else ''}, {self.mode}, "
                f"{self.nodes} node{'s' if self.nodes != 1 else ''}, {'; '.join(self.devices)}"
                f"{', smoke' if self.smoke else ''}{method}")

    def differences(self, other: Setup) -> list[str]:
        """What differs from ``other``, one phrase per field: 'backend gloo -> nccl'."""
        return [f"{name} {_shown(getattr(self, name))} -> {_shown(getattr(other, name))}"
                for name in (f.name for f in dataclasses.fields(self)) if getattr(self, name) != getattr(other, name)]


def node_devices(gpus: Sequence[str], cpu_model: str) -> str:
    """What a node computes on: its GPUs by name and count, or its CPU model."""
    if gpus:
        return ", ".join(f"{list(gpus).count(n)} x {n}" for n in sorted(set(gpus)))
    return f"cpu: {cpu_model}"


def setup_of(backend: str, tensors: str, world_size: int, mode: str, smoke: bool,
             nodes: Sequence[tuple[Sequence[str], str]], method: int = METHOD) -> Setup:
    """The setup of a run from how it ran and what its nodes computed on (GPU names, CPU model)."""
    return Setup(backend=backend, tensors=tensors, world_size=world_size, mode=mode, nodes=max(1, len(nodes)),
                 devices=tuple(sorted({node_devices(*n) for n in nodes}) or ["unknown"]), smoke=smoke, method=method)


def usual_tensors(backend: str) -> str:
    """Where a backend keeps its tensors unless told otherwise: CUDA under NCCL, the CPU under gloo."""
    return "cuda" if backend == "nccl" else "cpu"


def _shown(value: Any) -> str:
    return "; ".join(value) if isinstance(value, tuple) else str(value)


DIRTY = "+dirty"
"""How ``Run.commit`` marks a tree with uncommitted changes."""


@dataclass(frozen=True)
class Run:
    """Which run this is, where, and how it was started."""

    name: str = doc("the run's name: its UTC start time, made unique within its runs root")
    host: str = doc("the host of rank 0")
    setup: Setup = doc("how it ran (backend, ranks, launch, nodes, devices): what a comparison must share")
    commit: str | None = doc("the project's commit, with '+dirty' when the tree had changes; null when unknown", None)
    command: tuple[str, ...] | None = doc("the command that made the run, to reproduce it; null for runs that did "
                                          "not record it", None)

    @property
    def revision(self) -> str | None:
        """The commit alone, without its mark of uncommitted changes."""
        return self.commit.removesuffix(DIRTY) if self.commit else None

    @property
    def dirty(self) -> bool:
        """Whether the tree had uncommitted changes: the commit alone does not reproduce the run."""
        return bool(self.commit and self.commit.endswith(DIRTY))


@dataclass(frozen=True)
class Change:
    """One metric across two runs, as the gate judged it (reports.comparison.changes)."""

    key: str = doc("the metric")
    old: float | None = doc("its value in the earlier run; null when added")
    new: float | None = doc("its value in this run; null when removed")
    unit: str = doc("unit")
    better: Better = doc("higher or lower")
    relative: float | None = doc("(new - old) / |old|; null when old is 0 or absent")
    status: Literal["regression", "improvement", "unchanged", "added", "removed"] = doc(
        "regression, improvement, unchanged, added or removed")
    threshold: float = doc("the practical threshold the move was held against (relative, or absolute for "
                           "efficiencies)")
    gated: bool = doc("whether a regression fails the job")
    test: Literal["mann-whitney", "exact", "threshold", "-"] = doc("how it was judged: mann-whitney (samples on both sides), exact (counts), threshold (no "
                    "samples on one side) or - (added, removed)")
    p_value: float | None = doc("Mann-Whitney's two-sided p-value", None)
    p_adjusted: float | None = doc("Benjamini-Hochberg adjusted p-value within the metric's family (gated or "
                                   "informative)", None)
    absolute: bool = doc("whether the move is held against an absolute threshold", False)
    old_figure: Summary | None = doc("the earlier run's figure: median, interval, whether unstable", None)
    new_figure: Summary | None = doc("this run's figure", None)

    @property
    def family(self) -> str:
        return "gated" if self.gated else "informative"


@dataclass(frozen=True)
class Comparison:
    """This run against the newest earlier run of its setup: the nightly gate's decisions."""

    against: str | None = doc("the earlier run compared with; null when there is none")
    passed_over: tuple[str, ...] = doc("newer runs passed over, each with why (another setup, unreadable)")
    threshold: float = doc("the default relative threshold")
    alpha: float = doc("the false discovery rate of the significance test")
    changes: tuple[Change, ...] = doc("every metric of either run, sorted by key")
    error: str | None = doc("why no comparison could be made (an earlier run that cannot be read), or null", None)

    @property
    def regressions(self) -> list[Change]:
        """The gated regressions: what fails the job under --fail-on-regression."""
        return [c for c in self.changes if c.gated and c.status == "regression"]


@dataclass(frozen=True)
class Point:
    run: str = doc("the run")
    value: float = doc("the metric's value (a figure's median)")
    interval: tuple[float, float] | None = doc("95% interval of the median; null without one")


@dataclass(frozen=True)
class LevelShift:
    run: str = doc("the first run after the step")
    direction: Literal["regression", "improvement"] = doc("regression or improvement")
    change: float = doc("the level change, relative (or absolute for efficiencies)")


@dataclass(frozen=True)
class Series:
    """One gated metric over the runs of one setup, and the first change point beyond its threshold."""

    key: str = doc("the metric")
    unit: str = doc("unit")
    better: Better = doc("higher or lower")
    absolute: bool = doc("whether moves are absolute (efficiencies) rather than relative")
    setup: str = doc("the setup every run of the series shares")
    points: tuple[Point, ...] = doc("one per run that has the metric, oldest first")
    step: LevelShift | None = doc("the first change point beyond the threshold; null when none (or without "
                                            "ruptures)")


@dataclass(frozen=True)
class ClaimVerdict:
    """One quantitative claim of the design notes against what this run measured."""

    source: str = doc("the design note it comes from")
    claim: str = doc("the claim, with its range")
    measured: str = doc("what was measured, with its interval")
    outcome: Literal["holds", "does not hold", "not measurable", "not measured", "not assessed"] = doc(
        "holds (the claimed range meets the measured interval), does not hold (the interval lies wholly outside), "
        "not measurable (the backend lacks the mechanism), not measured (the run has no such figure), not "
        "assessed (a smoke run)")
    why: str = doc("why it was not measurable, measured or assessed; empty when it holds or does not")

    @property
    def verdict(self) -> str:
        """The outcome in words, with its reason."""
        words = {"does not hold": "does not hold here", "not measurable": "not measurable on this backend"}.get(
            self.outcome, self.outcome)
        return f"{words}: {self.why}" if self.why else words


@dataclass(frozen=True)
class ModuleScore:
    mode: Literal["whole", "sampled"] = doc("whole (every mutant) or sampled")
    mutants: int = doc("mutants cosmic-ray made")
    in_annotations: int = doc("of them inside type annotations, left out")
    eligible: int = doc("the population")
    chosen: int = doc("mutants chosen to run")
    run: int = doc("mutants run")
    killed: int = doc("killed by a test")
    survived: int = doc("survived every test")
    equivalent: int = doc("survivors triaged as equivalent")


@dataclass(frozen=True)
class MutationScore:
    """The mutation score of the reference as ``python -m mutation`` last measured it (mutation/score.json)."""

    format: int = doc("the score file's format")
    date: str = doc("when it was measured")
    commit: str = doc("at which commit")
    uncommitted: bool = doc("whether the tree had uncommitted changes")
    tool: str = doc("the mutation tool")
    seed: int = doc("the sampling seed")
    modules: dict[str, ModuleScore] = doc("per module")
    killed: int = doc("killed over every module")
    non_equivalent: int = doc("killed plus survived")
    score: float | None = doc("killed over non-equivalent")
    survivors: tuple[dict[str, Any], ...] = doc("each survivor: the mutant and its diff")


@dataclass(frozen=True)
class VerdictLine:
    kind: Literal["conformance", "search", "collectives", "gate", "benchmarks"] = doc(
        "what it judges: a suite run (conformance), the search past the covering arrays (search), the "
        "collectives' results (collectives), the regressions against the previous run (gate), or a benchmark that "
        "raised (benchmarks)")
    status: Literal["pass", "fail", "not applicable", "reported", "error"] = doc(
        "pass; fail (fails the run); not applicable (a suite run of which every check was skipped: nothing was "
        "checked, and nothing failed); reported (shown, not failing the run: gated regressions without "
        "--fail-on-regression, a failure or new finding of an implementation the verdict does not cover, or a "
        "benchmark a rank crashed in that then ran to its end on fresh ranks); "
        "error (could not be checked at all: exit 2)")
    text: str = doc("what was checked, with its counts")

    @property
    def fails(self) -> bool:
        return self.status in ("fail", "error")

    @property
    def error(self) -> bool:
        return self.status == "error"


@dataclass(frozen=True)
class Verdict:
    """The run's verdict, decided once: what the report says and the exit code of the job."""

    lines: tuple[VerdictLine, ...] = doc("each thing checked, in report order")
    fail_on_regression: bool = doc("whether a gated regression fails the run (--fail-on-regression)")
    covers: tuple[str, ...] = doc("the implementations whose conformance failures and new search findings fail the "
                                  "run (--impl as asked, else the reference; the reference whenever it ran); every "
                                  "other's are reported; empty for runs written before verdicts said so",
                                  default=())

    @property
    def passed(self) -> bool:
        return not any(line.fails for line in self.lines)

    @property
    def exit_code(self) -> int:
        """0 passed, 1 failed, 2 something could not be checked."""
        return 2 if any(line.error for line in self.lines) else 0 if self.passed else 1

    @property
    def word(self) -> str:
        """PASS, FAIL or ERROR, as the exit code says."""
        return ("PASS", "FAIL", "ERROR")[self.exit_code]


@dataclass(frozen=True)
class PhaseTime:
    """How long one phase of the main job took: what the next run's progress lines estimate from."""

    phase: Literal["benchmarks", "suites", "search", "strength"] = doc(
        "benchmarks, suites (both suites against every implementation), search (past the covering arrays), or "
        "strength (the broken implementations); judging and writing the run follow, untimed")
    seconds: float = doc("wall-clock seconds")


@dataclass(frozen=True)
class Upgrade:
    """What became of an older run when it was read: the file on disk is never changed."""

    from_schema: int = doc("the schema the run was written under")
    left_out: tuple[str, ...] = doc("what of it has no place in this model (records of an older method, ...), "
                                    "each with why")


Records = dataclasses.make_dataclass(
    "Records",
    [(b.name, tuple[b.record, ...], dataclasses.field(default=(), metadata={"doc": b.title})) for b in BENCHMARKS],
    frozen=True,
)
Records.__doc__ = "Each benchmark's records, a list under the benchmark's name."


@dataclass(frozen=True)
class Results:
    """Everything one run recorded and decided."""

    schema: int = doc(f"{SCHEMA}; older runs are upgraded when read (reports/store/upgrade.py)")
    run: Run = doc("which run, where, and its setup")
    settings: BenchSettings | None = doc("what the benchmarks measured: rounds, warm-up, bus-bandwidth sizes, "
                                         "models, implementations, budgets; null for older runs whose settings "
                                         "had another shape")
    nodes: tuple[Node, ...] = doc("every node the benchmarks ran on, by node rank, described by its first rank "
                                  "while they ran")
    conformance: tuple[SuiteRun, ...] = doc("each (suite, implementation) run")
    suite_world_size: int | None = doc("ranks the suites' child pytest spawned (--world-size); null when no suite "
                                       "ran")
    strength: tuple[StrengthRecord, ...] = doc("each deliberately broken implementation against its suite")
    explorations: tuple[Exploration, ...] = doc("the search past the multi-rank suite's covering arrays, per "
                                                "implementation, with what it found (--explore-seconds)")
    benchmarks: Records = doc("each benchmark's records (below)")
    overhead: tuple[OverheadRow, ...] = doc("padding of the catalogue's models planned at 40M-element buckets")
    metrics: dict[str, Metric] = doc("the flat map a comparison reads: key -> metric (below)")
    comparison: Comparison | None = doc("the gate's decisions against the previous run of this setup; null when "
                                        "nothing was compared")
    trend: tuple[Series, ...] = doc("each gated metric over the last runs of this setup, this one included")
    claims: tuple[ClaimVerdict, ...] = doc("the design notes' claims against this run")
    mutation: MutationScore | None = doc("the mutation score as it stood when the run was made; null when never "
                                         "measured")
    verdict: Verdict | None = doc("the verdict, decided once: what the report says and the exit code; null for runs "
                                  "written before verdicts were stored")
    plots: tuple[str, ...] = doc("the run's PNG files, relative to its directory")
    upgraded: Upgrade | None = doc("for a run written under an older schema: what reading it into this model "
                                   "left out; null for a run of this schema", None)
    strength_phase: StrengthPhase | None = doc("what the suite-strength phase measured and carried over; null when it "
                                               "did not run (or for runs written before it was budgeted)", None)
    phases: tuple[PhaseTime, ...] = doc("each phase of the main job and how long it took, in order; empty for runs "
                                        "written before phases were timed", ())
    bisection: Bisection | None = doc("with --bisect: which commit between the previous run's and this one's moved "
                                      "the gate's first regressed figure, added to the run once the search ends; "
                                      "null when none ran", None)
    benchmark_faults: tuple[BenchmarkFault, ...] = doc("each benchmark that raised, and where: its records are left "
                                                       "out, the others' are kept; empty for runs written before "
                                                       "faults were kept (a fault ended the job then)", ())

    def records(self, benchmark: str) -> Sequence[Any]:
        """The records of one benchmark (empty when it did not run)."""
        return getattr(self.benchmarks, benchmark)


def encode(results: Results) -> dict:
    return to_json(results)


def decode(data: dict) -> Results:
    return from_json(Results, data)
