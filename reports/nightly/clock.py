"""How long the main job has left, said as each phase starts, and how long each phase took, kept in the run.

The estimate of what is left is the phases of the newest earlier run of the
same kind (world size, smoke or not) that timed them, where there is one; a
first run estimates from the budgets of the phases that have one and from
what a suite session took on this project's machine (``FIRST_RUN``). Each
line says which it used.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..store.model import PhaseTime
from ..store.runs import Runs

PHASES = ("benchmarks", "suites", "search", "strength", "report")
FIRST_RUN = {"benchmark budget": 1.4, "suite session": 45.0, "search start": 12.0, "strength start": 10.0,
             "report": 30.0}
"""A first run's estimates, from the main job on the project's 2-core machine (2026-11-27): the benchmarks took
1.4 times the seconds of their budgets; a session of both suites against one implementation 30-60 s; a search's
session 8-15 s beyond its budget; the strength phase 10 s beyond its; judging, writing and the site 30 s."""


def earlier_phases(runs: Runs, world_size: int, smoke: bool) -> tuple[str, dict[str, float]] | None:
    """The newest run of this world size and kind that timed its phases: its name and its phases' seconds."""
    found = runs.newest(lambda r: bool(r.phases) and r.run.setup.world_size == world_size
                        and r.run.setup.smoke == smoke)
    return None if found is None else (found.run.name, {p.phase: p.seconds for p in found.phases})


@dataclass
class Clock:
    """Says, as each phase starts, about how long the job has left; keeps how long each phase took."""

    planned: Mapping[str, float]
    """Each phase that will run, and the seconds it is expected to take."""
    basis: str
    """What ``planned`` comes from, as the progress line says it."""
    say: Callable[[str], None]
    taken: dict[str, float] = field(default_factory=dict)
    _running: tuple[str, float] | None = None

    def phase(self, name: str, doing: str) -> None:
        """``name`` starts (one of ``PHASES``), doing ``doing``."""
        self._stop()
        left = sum(seconds for phase, seconds in self.planned.items() if PHASES.index(phase) >= PHASES.index(name))
        self.say(f"{doing} (about {_minutes(left)} left in the job, {self.basis})")
        self._running = (name, time.monotonic())

    def times(self) -> tuple[PhaseTime, ...]:
        """Every phase that ran, with its seconds; the one running now ends here."""
        self._stop()
        return tuple(PhaseTime(phase, round(seconds, 1)) for phase, seconds in self.taken.items())

    def _stop(self) -> None:
        if self._running is not None:
            name, began = self._running
            self.taken[name] = self.taken.get(name, 0.0) + time.monotonic() - began
            self._running = None


def first_run_plan(benchmark_budgets: float, suite_sessions: int, search_seconds: float, searches: int,
                   strength_budget: float | None) -> dict[str, float]:
    """What a first run's phases are expected to take (``FIRST_RUN``); a phase that does not run is left out."""
    plan = {"benchmarks": benchmark_budgets * FIRST_RUN["benchmark budget"],
            "suites": suite_sessions * FIRST_RUN["suite session"],
            "search": search_seconds + searches * FIRST_RUN["search start"],
            "strength": None if strength_budget is None else strength_budget + FIRST_RUN["strength start"],
            "report": FIRST_RUN["report"]}
    return {phase: seconds for phase, seconds in plan.items() if seconds}


@dataclass(frozen=True)
class Fitted:
    """The search's and the strength phase's seconds, cut where needed to end by the deadline, and what was cut."""

    search: dict[str, float]
    strength: float | None
    cuts: tuple[str, ...]


MIN_PHASE = 10.0
"""Seconds below which a search or the strength phase is left out rather than run: its start alone costs about
that (``FIRST_RUN``)."""


def fit_to_deadline(left: float, search: Mapping[str, float], covers: Sequence[str],
                    strength: float | None) -> Fitted:
    """Cut the elastic phases to what ``left`` seconds hold, the report's writing kept aside, in the order of what a
    night loses least by: the peers' searches (reported, never failed), then the strength phase's measuring (0
    seconds: its rows carried over from the runs that measured them, so the run still shows them), then the seconds
    of each search the verdict covers, evenly; last, the strength phase itself."""
    spare = left - FIRST_RUN["report"]
    search, cuts = dict(search), []

    def searching(budgets: Mapping[str, float]) -> float:
        return sum(seconds + FIRST_RUN["search start"] for seconds in budgets.values())

    def measuring(seconds: float | None) -> float:
        return 0.0 if seconds is None else seconds + FIRST_RUN["strength start"]

    if searching(search) + measuring(strength) <= spare:
        return Fitted(search, strength, ())
    peers = [impl for impl in search if impl not in covers]
    if peers:
        search = {impl: seconds for impl, seconds in search.items() if impl in covers}
        cuts.append(f"no search of {', '.join(peers)}")
    if strength is not None and searching(search) + measuring(strength) > spare:
        room = spare - searching(search) - FIRST_RUN["strength start"]
        strength = room if room >= MIN_PHASE else 0.0  # 0: its start alone, every row carried over
        cuts.append(f"the strength phase measures {room:.0f} s" if strength else
                    "the strength phase measures nothing, its rows carried over")
    if search and searching(search) + measuring(strength) > spare:
        each = (spare - measuring(strength)) / len(search) - FIRST_RUN["search start"]
        if each >= MIN_PHASE:
            search = {impl: min(seconds, round(each, 1)) for impl, seconds in search.items()}
            cuts.append(f"each search the verdict covers takes {each:.0f} s")
        else:
            cuts.append(f"no search of {', '.join(search)}")
            search = {}
    if strength is not None and measuring(strength) > spare:
        cuts.append("no strength phase")
        strength = None
    return Fitted(search, strength, tuple(cuts))


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
