"""Suite strength: run every deliberately broken implementation and record which tests catch it."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from fixtures.broken import BrokenEntry, catalogue

from .records import StrengthRecord
from .suites import run_suite


@dataclass
class Caught:
    entry: BrokenEntry
    failed_ids: list[str]
    exit_code: int
    crashed_ids: list[str]

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


def composed_catchers(meets: dict[str, str]) -> tuple[str, list[str]]:
    """The smallest covering array sure to hold compositions containing ``meets`` (every pair, or every three
    values), and the node-id patterns of those compositions."""
    from suites.multigpu.covering import STRENGTHS, rows
    from suites.multigpu.records import COMPOSED
    from suites.multigpu.space import spell

    name = STRENGTHS[max(2, min(len(meets), 3))]
    return name, [f"{COMPOSED}[[]{spell(row)}]" for row in rows(name) if all(row[a] == v for a, v in meets.items())]


# Which tests fail is what counts here, not how hard hypothesis searches or how small a failing
# example it finds: the "strength" profile is CI's (derandomized, bounded) without shrinking.
STRENGTH_ARGS = ["--hypothesis-profile=strength"]


def measure_strength(progress=print) -> list[Caught]:
    """Each broken implementation against the suite it targets (full suite, default world size)."""
    results = []
    for entry in catalogue():
        result = run_suite(entry.suite, entry.impl_spec, STRENGTH_ARGS, in_process=True)
        progress(f"  {entry.name}: {len(result.failed_ids)} failing tests")
        results.append(Caught(entry, result.failed_ids, result.exit_code, result.crashed_ids))
    return results


def strength_records(results: list[Caught]) -> list[StrengthRecord]:
    return [StrengthRecord(broken=r.entry.name, bug=r.entry.bug, suite=r.entry.suite, caught=r.caught,
                           expected_tests_failed=r.expected_caught, failing_tests=len(r.checked_ids),
                           crashed_tests=len(r.crashed_ids), caught_by=", ".join(r.modules()))
            for r in results]
