"""Searching the configuration space past the covering array, and shrinking what fails to its smallest composition.

``pytest suites/multigpu --explore N`` runs the compositions of the triples
covering array first (every three axis values meet, starting at a row the
seed picks), then compositions that hypothesis draws under the same rules,
until N compositions have been drawn from them or ``--explore-seconds`` have
passed: the seconds bound everything, confirming and shrinking included (a
finding whose shrinking the budget cut short says so). The draws follow
``--explore-seed``: the same seed, database and budget draw the same
compositions. A composition that fails is shrunk: hypothesis shrinks what its
search finds (axes back to the base, then fewer steps), and a failure of
the triples is shrunk the same way by taking away one axis at a time while it
still fails. Either way a last pass takes away any one remaining axis, so
every axis left is one that must combine, then tries the fewest steps and
the other values of each axis. A composition the implementation cannot run,
or at a world size this session cannot start, is never a step of shrinking:
it neither fails nor passes.

Each finding is one line that reproduces it (``pytest suites/multigpu
--impl X --case '<composition>'``). A composition holding a finding's axes
at values that failed is not run again: it would fail for the same reason;
nor is one the implementation's expectation list records as a known failure
(``expected``): the search looks for what is not known.
Hypothesis' example database (``--explore-db``, one folder per
implementation) keeps every failure its search found, and the next
exploration tries them first.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, assume, given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Unsatisfiable

from .records import STEPS, Exploration, Finding
from .space import AXES, BY_NAME, extendable, moved, spell, violated

SHRINK_RUNS = 60
"""Runs hypothesis may spend shrinking one failure of its search."""


class Budget:
    def __init__(self, compositions: int, seconds: float | None) -> None:
        self.left, self.deadline = compositions, None if seconds is None else time.monotonic() + seconds

    def spent(self) -> str | None:
        if self.left <= 0:
            return "compositions"
        return "time" if self.out_of_time() else None

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline


class Spent(BaseException):
    """The budget ran out while hypothesis was drawing. A ``BaseException``: hypothesis neither takes it for a
    failure to shrink nor keeps it, it ends the search at once (drawing on, even without running what it draws,
    would go on up to the compositions asked for)."""


class Found(Exception):
    def __init__(self, labels: dict[str, str], steps: int, message: str) -> None:
        super().__init__(message)
        self.labels, self.steps, self.message = labels, steps, message


class Unsupported(Exception):
    """The implementation under test cannot run this composition (the reason its case skips with)."""


Run = Callable[[dict[str, str], int], str | None]
"""Runs one composition for some steps: None if it passed, else why it failed. Raises ``Unsupported`` for a
composition the implementation cannot run."""


Expected = Callable[[dict[str, str]], str | None]
"""Why the implementation's expectation list records a composition (every axis labelled) as a known failure, or
None."""


def compositions(worlds: Iterable[str], supported: Callable[[dict[str, str]], bool],
                 known: list[Finding], expected: Expected = lambda labels: None) -> st.SearchStrategy:
    """Compositions the rules allow on these world sizes and the implementation can run (``supported`` answers for
    the axes drawn so far), drawn axis by axis (each axis shrinking to its base), none holding a finding already
    made or known to fail; with a number of steps (shrinking to 1)."""
    worlds = set(worlds)

    @st.composite
    def composition(draw) -> tuple[dict[str, str], int]:
        labels: dict[str, str] = {}
        for axis in AXES:
            allowed = [v for v in axis.labels if (axis.name != "world" or v in worlds)
                       and extendable({**labels, axis.name: v}) and supported({**labels, axis.name: v})]
            assume(allowed)
            labels[axis.name] = draw(st.sampled_from(allowed))
        assume(not any(finding.contains(labels) for finding in known) and expected(labels) is None)
        return labels, draw(st.integers(1, STEPS))

    return composition()


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
    seed: int | None = None
    """Hypothesis' seed, and where the triples start: the same seed, database and budget run the same compositions.
    None: hypothesis picks one, and the triples start at their first row."""
    expected: Expected = lambda labels: None
    findings: list[Finding] = field(default_factory=list)
    runs: int = 0
    unsupported: int = 0
    explained: int = 0
    known: int = 0
    budget: Budget | None = field(default=None, init=False)

    def explore(self, triples: list[dict[str, str]], budget: Budget) -> Exploration:
        start = time.monotonic()
        self.budget = budget
        ran = 0
        for labels in rotated(triples, self.seed):
            if budget.spent():
                break
            if not self._runnable(labels):
                self.unsupported += 1
                continue
            if any(f.contains(labels) for f in self.findings):
                self.explained += 1
                continue
            if self.expected(labels) is not None:
                self.known += 1
                continue
            budget.left -= 1
            ran += 1
            outcome = self._attempt(labels, STEPS)
            if outcome is not None:
                self.findings.append(self._finish(labels, STEPS, outcome, "triples"))
        searched = self._search(budget)
        return Exploration(impl=self.impl, triples=ran, searched=searched, unsupported=self.unsupported,
                           explained=self.explained, runs=self.runs, seconds=round(time.monotonic() - start, 1),
                           findings=tuple(self.findings), stopped_by=budget.spent() or "nothing left to try",
                           seed=self.seed, known_skipped=self.known)

    def _runnable(self, labels: dict[str, str]) -> bool:
        """A composition this session can run: the rules allow it, its world size is here, the implementation
        can express it."""
        return labels["world"] in self.worlds and not violated(labels) and self.supported(labels)

    def _attempt(self, labels: dict[str, str], steps: int) -> str | None:
        """None if it passed (or turned out unsupported: counted), else why it failed."""
        self.runs += 1
        try:
            return self.run(labels, steps)
        except Unsupported:
            self.unsupported += 1
            return None

    def _outcome(self, labels: dict[str, str], steps: int) -> str | None | Unsupported:
        """A shrinking step's outcome: why it failed, None if it passed, ``Unsupported`` if it cannot tell."""
        if not self._runnable(labels):
            return Unsupported()
        self.runs += 1
        try:
            return self.run(labels, steps)
        except Unsupported as exc:
            return exc

    def _settings(self, examples: int, key: str) -> settings:
        database = DirectoryBasedExampleDatabase(f"{self.database}/{key}") if self.database else None
        return settings(max_examples=max(examples, 1), database=database, deadline=None, derandomize=False,
                        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
                        suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False)

    def _search(self, budget: Budget) -> int:
        """Hypothesis' search, a finding at a time: a failure it shrinks ends one search, and the next leaves out
        compositions holding it. Returns the compositions it drew and ran (shrinking not counted). Each draw costs
        the same bookkeeping however many came before it."""
        searched = 0
        while not budget.spent():
            state = {"drawn": 0, "shrinking": 0, "failing": False}
            outcomes: dict[str, str | None] = {}  # hypothesis must see the same result for the same composition

            def body(drawn: tuple[dict[str, str], int]) -> None:
                labels, steps = drawn
                key = f"{spell(labels)},steps={steps}"
                if key not in outcomes:
                    if not state["failing"]:
                        if budget.spent():
                            raise Spent
                        state["drawn"] += 1
                        outcomes[key] = self._attempt(labels, steps)
                    elif state["shrinking"] >= SHRINK_RUNS or budget.out_of_time():
                        outcomes[key] = None  # past what shrinking may spend: taken as passing, not run
                    else:
                        state["shrinking"] += 1
                        outcomes[key] = self._attempt(labels, steps)
                    state["failing"] = state["failing"] or outcomes[key] is not None
                if outcomes[key] is not None:
                    raise Found(labels, steps, outcomes[key])

            test = given(compositions(self.worlds, self.supported, self.findings, self.expected))(body)
            if self.seed is not None:
                test = seed(self.seed)(test)
            # A search leaving out other findings replays failures of its own: each keeps its own examples.
            shelf = "-".join([self.impl, *sorted(f.composition for f in self.findings)])
            try:
                self._settings(budget.left, hashlib.sha256(shelf.encode()).hexdigest()[:16])(test)()
                found = None
            except Found as failure:
                found = failure
            except (Spent, Unsatisfiable):
                found = None
            searched += state["drawn"]
            budget.left -= state["drawn"]
            if found is None:
                break
            self.findings.append(self._finish(found.labels, found.steps, found.message, "search"))
        return searched

    def _finish(self, labels: dict[str, str], steps: int, message: str, found_by: str) -> Finding:
        """Shrink a failure: take away any axis whose removal still fails until every axis left is needed, then
        the fewest steps that fail, then the other values of each axis that fail with the others held. Within the
        budget's time: a finding it cut short is kept as far as it got, and says so."""
        start = self.runs
        confirmed = self._outcome(labels, steps)
        if not isinstance(confirmed, str):  # it did not fail again: reported as it was found, not shrunk
            return Finding(spell(labels), {a: [v] for a, v in moved(labels).items()}, steps,
                           f"flaky: failed once, then not ({first_line(message)})", found_by, self.runs - start)
        message, changed = confirmed, True
        while changed and not self._late():
            changed = False
            for axis in moved(labels):
                if self._late():
                    break
                outcome = self._outcome({**labels, axis: BY_NAME[axis].base}, steps)
                if isinstance(outcome, str):
                    labels, message, changed = {**labels, axis: BY_NAME[axis].base}, outcome, True
                    break
        for fewer in range(1, steps):
            if self._late():
                break
            outcome = self._outcome(labels, fewer)
            if isinstance(outcome, str):
                steps, message = fewer, outcome
                break
        values = {}
        for axis, value in moved(labels).items():
            values[axis] = [value] + [other for other in BY_NAME[axis].labels if other not in (value, BY_NAME[axis].base)
                                      and not self._late() and isinstance(self._outcome({**labels, axis: other}, steps), str)]
        values = {axis: sorted(vs, key=BY_NAME[axis].labels.index) for axis, vs in values.items()}
        simplest = {**labels, **{axis: vs[0] for axis, vs in values.items()}}
        if simplest != labels and not self._late():  # each axis at its first failing value, if they fail together too
            outcome = self._outcome(simplest, steps)
            if isinstance(outcome, str):
                labels, message = simplest, outcome
        return Finding(spell(labels), values, steps, first_line(message), found_by, self.runs - start,
                       shrunk=not self._late())

    def _late(self) -> bool:
        return self.budget is not None and self.budget.out_of_time()


def rotated(rows: list[dict[str, str]], seed: int | None) -> list[dict[str, str]]:
    """The rows starting at the one ``seed`` picks: a search cut short by its budget meets other triples under
    another seed."""
    if not rows or seed is None:
        return list(rows)
    start = seed % len(rows)
    return rows[start:] + rows[:start]
