"""Suite strength: run the deliberately broken implementations and record which tests catch each.

The main job runs this as a child process (``python -m selfcheck.strength``): it is the project's check of its
own suites, which imports the catalogue from ``fixtures/broken``, and what users run imports neither.

Every one, against its whole suite, takes longer than the main job can give
it (11.5 min on 2 cores), and repeats what CI proves on every commit: each is
caught by the tests its entry names (``tests/selfcheck/test_strength.py``).
So a run measures a share within a budget, those never measured first, then
the longest ago, and carries every other row over from the run that measured
it, which the row names: over a few nights every entry is measured again.

A bug that needs three axes to meet (``MEETS``) may escape the suite, whose
compositions meet every pair: it is then run against the compositions of the
triples that meet its axes (where the nightly search starts), and its row
says it is caught there, not by the pairs.
"""

from __future__ import annotations

import fnmatch
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Sequence

from cli import OutFolder, Parser, Real
from datamodel import to_json
from fixtures.broken import BrokenEntry, catalogue
from reports.conformance.records import MEASURED, CaughtIn, StrengthMeasured, StrengthPhase, StrengthRecord
from reports.conformance.suites import run_suite
from reports.store.arguments import RunsRoot

CI_PROOF = "tests/selfcheck/test_strength.py"


@dataclass
class Caught:
    entry: BrokenEntry
    failed_ids: list[str]
    exit_code: int
    crashed_ids: list[str]
    caught_in: CaughtIn = "suite"

    @property
    def checked_ids(self) -> list[str]:
        """The failures that were checks failing, not the broken implementation crashing."""
        return [f for f in self.failed_ids if f not in self.crashed_ids]

    @property
    def caught(self) -> bool:
        return bool(self.checked_ids)

    @property
    def expected_caught(self) -> bool:
        """Every test named in the entry's CAUGHT_BY failed, by a check."""
        return all(any(fnmatch.fnmatchcase(f, p) for f in self.checked_ids) for p in self.entry.caught_by)

    def modules(self) -> list[str]:
        return sorted({f.split("::")[0].rsplit("/", 1)[-1] for f in self.checked_ids})

    def record(self) -> StrengthRecord:
        return StrengthRecord(broken=self.entry.name, bug=self.entry.bug, suite=self.entry.suite,
                              caught=self.caught, expected_tests_failed=self.expected_caught,
                              failing_tests=len(self.checked_ids), crashed_tests=len(self.crashed_ids),
                              caught_by=", ".join(self.modules()),
                              caught_in=self.caught_in if self.caught else "nowhere")


def composed_catchers(meets: dict[str, str]) -> tuple[str, list[str]]:
    """The smallest covering array sure to hold compositions containing ``meets`` (every pair, or every three
    values), and the node-id patterns of those compositions; for four axes or more, which no array here is sure to
    meet (a quantized weight's bug needs a distributed policy and bf16 params besides), ``case``: the one
    composition they make."""
    from suites.multigpu.covering import STRENGTHS, rows
    from suites.multigpu.records import COMPOSED
    from suites.multigpu.space import spell

    if len(meets) > 3:
        return "case", [spell(meets)]
    name = STRENGTHS[max(2, len(meets))]
    return name, [f"{COMPOSED}[[]{spell(row)}]" for row in rows(name) if all(row[a] == v for a, v in meets.items())]


def composed_args(strength: str, ids: list[str]) -> list[str]:
    """The suite's arguments that run what ``composed_catchers`` answered."""
    if strength == "case":
        return [f"--case={ids[0]}"]
    return [f"--compositions={strength}", *(f"--only={i}" for i in ids)]


# Which tests fail is what counts here, not how hard hypothesis searches or how small a failing
# example it finds: the "strength" profile is CI's (derandomized, bounded) without shrinking.
STRENGTH_ARGS = ["--hypothesis-profile=strength"]


def measure(entry: BrokenEntry) -> Caught:
    """One broken implementation against its whole suite; a composition bug the pairs miss, against the triples
    that meet its axes."""
    result = run_suite(entry.suite, entry.impl_spec, STRENGTH_ARGS, in_process=True)
    caught = Caught(entry, list(result.failed_ids), result.exit_code, list(result.crashed_ids))
    if caught.caught or not entry.meets or len(entry.meets) != 3:
        return caught
    strength, ids = composed_catchers(entry.meets)
    triples = run_suite("suites/multigpu/test_compositions.py", entry.impl_spec,
                        [*STRENGTH_ARGS, *composed_args(strength, ids)], in_process=True)
    return Caught(entry, caught.failed_ids + list(triples.failed_ids), caught.exit_code,
                  caught.crashed_ids + list(triples.crashed_ids), "triples")


def measure_strength(progress: Callable[[str], None] = print, budget: float | None = None,
                     carried: Mapping[str, StrengthRecord] | None = None,
                     entries: list[BrokenEntry] | None = None) -> tuple[list[StrengthRecord], StrengthPhase]:
    """The catalogue's rows: measured here, those never measured first, then the longest ago, until ``budget``
    seconds would be passed (None: every one); the others ``carried`` over from the runs that measured them
    (``measured_in`` names each)."""
    entries = catalogue() if entries is None else entries
    carried = dict(carried or {})
    order = sorted(entries, key=lambda e: (e.name in carried, carried[e.name].measured_in if e.name in carried else ""))
    start, longest, rows = time.monotonic(), 0.0, {}
    for entry in order:
        if budget is not None and (budget <= 0 or time.monotonic() - start + longest > budget):
            break
        began = time.monotonic()
        caught = measure(entry)
        longest = max(longest, time.monotonic() - began)
        progress(f"  {entry.name}: {len(caught.failed_ids)} failing tests"
                 + (" (in the triples that meet its axes)" if caught.caught_in == "triples" else ""))
        rows[entry.name] = caught.record()
    measured = len(rows)
    for entry in entries:
        if entry.name not in rows and entry.name in carried:
            rows[entry.name] = carried[entry.name]
    phase = StrengthPhase(catalogue=len(entries), measured=measured, carried=len(rows) - measured,
                          seconds=round(time.monotonic() - start, 1), budget=budget, proven_by=CI_PROOF)
    return [rows[e.name] for e in entries if e.name in rows], phase


def carried_rows(rows: tuple[StrengthRecord, ...], run: str) -> dict[str, StrengthRecord]:
    """A run's strength rows by broken implementation, each naming the run that measured it."""
    return {r.broken: replace(r, measured_in=r.measured_in or run) for r in rows}


def parser() -> Parser:
    p = Parser(prog="python -m selfcheck.strength", description=__doc__)
    p.add_argument("--seconds", type=Real(above=None, minimum=0, unit="seconds"), default=None,
                   help="seconds measuring may take (default: every entry, about 11.5 min on 2 cores; 0: none, "
                        "every row carried over)")
    p.add_argument("--root", type=RunsRoot(), default=None,
                   help="the runs root whose newest run with strength rows the rows not measured carry over from")
    p.add_argument("--out", type=OutFolder("the strength rows' folder"), required=True,
                   help=f"the folder to write {MEASURED} into (the rows and the phase)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    earlier = args.root.newest(lambda r: bool(r.strength)) if args.root else None
    carried = carried_rows(earlier.strength, earlier.run.name) if earlier else {}
    rows, phase = measure_strength(print, args.seconds, carried)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / MEASURED).write_text(json.dumps(to_json(StrengthMeasured(tuple(rows), phase)), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
