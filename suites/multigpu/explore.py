"""Searching the configuration space past the covering array, and shrinking what fails to its smallest composition.

``pytest suites/multigpu --explore N`` runs the compositions of the triples
covering array first (every three axis values meet), then compositions that
hypothesis draws under the same rules, until N compositions have run (or
``--explore-seconds`` have passed). A failing composition is shrunk by
hypothesis: axes back to the base, then fewer steps; a last pass checks that
taking away any one remaining axis makes it pass, so every axis left is one
that must combine. Each finding is one line that reproduces it
(``pytest suites/multigpu --impl X --case '<composition>'``). A composition
that contains one already found is not run again: it would fail for the
same reason. Hypothesis' example database (``--explore-db``, one folder per
implementation) keeps every failure, and the next exploration tries them
first.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, assume, find, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import NoSuchExample, Unsatisfiable

from datamodel import doc

from .records import STEPS, Exploration, Finding
from .space import AXES, BASE, BY_NAME, Composition, extendable, moved, spell, violated

SHRINK_RUNS = 60
"""Runs one finding may spend on shrinking."""


class Budget:
    def __init__(self, compositions: int, seconds: float | None) -> None:
        self.left, self.deadline = compositions, None if seconds is None else time.monotonic() + seconds

    def spent(self) -> str | None:
        if self.left <= 0:
            return "compositions"
        if self.deadline is not None and time.monotonic() > self.deadline:
            return "time"
        return None


class Found(Exception):
    def __init__(self, labels: dict[str, str], steps: int, message: str) -> None:
        super().__init__(message)
        self.labels, self.steps, self.message = labels, steps, message


Run = Callable[[dict[str, str], int], str | None]
"""Runs one composition for some steps: None if it passed, else why it failed. Raises ``Unsupported`` for a
composition the implementation cannot run."""


class Unsupported(Exception):
    """The implementation under test cannot run this composition (the reason its case skips with)."""


def compositions(worlds: Iterable[str], supported: Callable[[dict[str, str]], bool],
                 known: list[Finding]) -> st.SearchStrategy:
    """Compositions the rules allow on these world sizes and the implementation can run (``supported`` answers for
    the axes drawn so far), drawn axis by axis (each axis shrinking to its base), none containing a finding already
    made; with a number of steps (shrinking to 1)."""
    worlds = set(worlds)

    @st.composite
    def draw(data) -> tuple[dict[str, str], int]:
        labels: dict[str, str] = {}
        for axis in AXES:
            allowed = [v for v in axis.labels if (axis.name != "world" or v in worlds)
                       and extendable({**labels, axis.name: v}) and supported({**labels, axis.name: v})]
            assume(allowed)
            labels[axis.name] = data(st.sampled_from(allowed))
        assume(not any(finding.contains(labels) for finding in known))
        return labels, data(st.integers(1, STEPS))

    return draw()


def first_line(message: str) -> str:
    """The first assertion a failure reports, else its first line."""
    found = re.search(r"AssertionError: (.+)", message)
    return (found.group(1) if found else message.strip().splitlines()[0] if message.strip() else "failed")[:400]


@dataclass
class Explorer:
    run: Run
    impl: str
    worlds: tuple[str, ...]
    supported: Callable[[dict[str, str]], bool]
    database: str | None = None
    findings: list[Finding] = field(default_factory=list)
    runs: int = 0
    unsupported: int = 0
    explained: int = 0

    def explore(self, triples: list[dict[str, str]], budget: Budget) -> Exploration:
        start = time.monotonic()
        ran = 0
        for labels in triples:
            if budget.spent() or labels["world"] not in self.worlds:
                continue
            if any(f.contains(labels) for f in self.findings):
                self.explained += 1
                continue
            budget.left -= 1
            ran += 1
            outcome = self._attempt(labels, STEPS)
            if outcome is not None:
                self.findings.append(self._shrink(labels, outcome, "triples"))
        searched = self._search(budget)
        return Exploration(self.impl, ran, searched, self.unsupported, self.explained, self.runs,
                           round(time.monotonic() - start, 1), tuple(self.findings),
                           budget.spent() or "nothing left to try")

    def _attempt(self, labels: dict[str, str], steps: int) -> str | None:
        """None if it passed (or cannot run here), else why it failed."""
        self.runs += 1
        try:
            return self.run(labels, steps)
        except Unsupported:
            self.unsupported += 1
            return None

    def _settings(self, examples: int, key: str) -> settings:
        database = DirectoryBasedExampleDatabase(f"{self.database}/{key}") if self.database else None
        return settings(max_examples=max(examples, 1), database=database, deadline=None, derandomize=False,
                        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
                        suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False)

    def _search(self, budget: Budget) -> int:
        """Hypothesis' search, a finding at a time: a failure it shrinks ends one search, and the next leaves out
        compositions containing it. Returns the compositions it drew and ran (shrinking not counted)."""
        searched = 0
        while not budget.spent():
            state = {"drawn": 0, "shrinking": 0}
            outcomes: dict[str, str | None] = {}  # hypothesis must see the same result for the same composition

            def body(drawn: tuple[dict[str, str], int]) -> None:
                labels, steps = drawn
                key = f"{spell(labels)},steps={steps}"
                if key not in outcomes:
                    failing = any(outcome is not None for outcome in outcomes.values())
                    if failing and state["shrinking"] >= SHRINK_RUNS or not failing and budget.spent() == "time":
                        outcomes[key] = None  # past the runs it may spend: taken as passing, not run
                    else:
                        state["shrinking" if failing else "drawn"] += 1
                        outcomes[key] = self._attempt(labels, steps)
                if outcomes[key] is not None:
                    raise Found(labels, steps, outcomes[key])

            test = given(compositions(self.worlds, self.supported, self.findings))(body)
            # A search leaving out other findings replays failures of its own: each keeps its own examples.
            shelf = "-".join([self.impl, *sorted(f.composition for f in self.findings)])
            try:
                self._settings(budget.left, hashlib.sha256(shelf.encode()).hexdigest()[:16])(test)()
                found = None
            except Found as failure:
                found = failure
            except Unsatisfiable:
                found = None
            searched += state["drawn"]
            budget.left -= state["drawn"]
            if found is None:
                break
            self.findings.append(self._finish(found.labels, found.steps, found.message, "search",
                                              state["shrinking"]))
        return searched

    def _shrink(self, labels: dict[str, str], message: str, found_by: str) -> Finding:
        """The smallest sub-composition of ``labels`` (axes back to the base, fewer steps) that still fails."""
        axes = list(moved(labels))
        outcomes: dict[str, bool] = {}  # hypothesis must see the same answer for the same composition

        def fails(drawn: tuple[dict[str, bool], int]) -> bool:
            keep, steps = drawn
            candidate = {**BASE, **{a: labels[a] for a in axes if keep[a]}}
            key = f"{spell(candidate)},steps={steps}"
            if key not in outcomes:
                runnable = not violated(candidate) and len(outcomes) < SHRINK_RUNS
                outcomes[key] = runnable and self._attempt(candidate, steps) is not None
            return outcomes[key]

        strategy = st.tuples(st.fixed_dictionaries({a: st.booleans() for a in axes}), st.integers(1, STEPS))
        try:
            keep, steps = find(strategy, fails, settings=self._settings(SHRINK_RUNS, "shrunk"),
                               database_key=f"{self.impl}:{spell(labels)}".encode())
            labels = {**BASE, **{a: labels[a] for a in axes if keep[a]}}
        except NoSuchExample:  # no smaller failure within the runs: the composition as found
            steps = STEPS
        return self._finish(labels, steps, message, found_by, len(outcomes))

    def _finish(self, labels: dict[str, str], steps: int, message: str, found_by: str, runs: int) -> Finding:
        """Take away any axis whose removal still fails, until every axis left is needed; then try the other
        values of each."""
        outcome = self._attempt(labels, steps)
        message = outcome or message
        changed = True
        while changed:
            changed = False
            for axis in moved(labels):
                candidate = {**labels, axis: BY_NAME[axis].base}
                if violated(candidate):
                    continue
                runs += 1
                outcome = self._attempt(candidate, steps)
                if outcome is not None:
                    labels, message, changed = candidate, outcome, True
                    break
        values = {}
        for axis, value in moved(labels).items():
            values[axis] = [value]
            for other in BY_NAME[axis].labels:
                candidate = {**labels, axis: other}
                if other in (value, BY_NAME[axis].base) or violated(candidate):
                    continue
                runs += 1
                if self._attempt(candidate, steps) is not None:
                    values[axis].append(other)
        values = {axis: sorted(vs, key=BY_NAME[axis].labels.index) for axis, vs in values.items()}
        simplest = {**labels, **{axis: vs[0] for axis, vs in values.items()}}
        if simplest != labels:  # each axis at its first failing value, if they fail together too
            runs += 1
            outcome = self._attempt(simplest, steps)
            if outcome is not None:
                labels, message = simplest, outcome
        return Finding(spell(labels), values, steps, first_line(message), found_by, runs)
