"""The conformance runs and the suite-strength runs as markdown."""

from __future__ import annotations

from typing import Sequence

from ..conformance.strength import StrengthRecord
from ..conformance.suites import SuiteRun
from suites.multigpu.records import Exploration
from .table import table


def conformance_markdown(results: Sequence[SuiteRun]) -> str:
    """One row per (suite, implementation), then each run's failures and skip reasons."""
    rows = [
        {"suite": r.suite, "implementation": r.header or r.impl, "passed": r.passed,
         "failed": r.failed + r.errors, "skipped": r.skipped, "xfailed": r.xfailed,
         "verdict": SUITE_WORDS[r.status]}
        for r in results
    ]
    text = table(rows)
    for r in results:
        if r.why():
            text += f"\n\n{r.impl} in {r.suite}: {r.why()}."
        if r.failures:
            text += f"\n\nFailures of {r.impl} in {r.suite}:\n" + "\n".join(f"- {f}" for f in r.failures[:20])
        if r.skip_reasons:
            reasons = sorted(r.skip_reasons.items(), key=lambda kv: -kv[1])
            text += f"\n\nSkips of {r.impl} in {r.suite} (count: reason):\n" + "\n".join(
                f"- {n}: {reason}" for reason, n in reasons
            )
    return text


SUITE_WORDS = {"pass": "PASS", "fail": "FAIL", "not applicable": "N/A"}
"""A suite run's status (``SuiteRun.status``) as the conformance table words it."""


def compositions_markdown(results: Sequence[SuiteRun], explorations: Sequence[Exploration]) -> str:
    """How much of the configuration space each implementation's compositions covered, what the rules removed,
    and what the search past the covering arrays found, each finding with the line that reproduces it."""
    covered = [r for r in results if r.compositions is not None]
    if not covered and not explorations:
        return "No composition ran (the multi-rank suite was not run)."
    parts = []
    if covered:
        rows = [{"implementation": r.label, "set": c.name, "compositions run": c.cases,
                 "covered": f"{c.covered} of {c.expressible}" + (" (all)" if c.covered == c.expressible else ""),
                 "it can express": c.expressible, "the rules allow": c.allowed, "in all": c.total}
                for r in covered for c in [r.compositions]]
        first = covered[0].compositions
        removed = [{"removed by": " + ".join(x.rules), "combinations": x.count, "e.g.": x.example}
                   for x in first.removals]
        parts += ["Combinations of axis values (suites/multigpu/space.py) that the compositions which ran contain, "
                  "among those each implementation can express:", table(rows, numparse=False),
                  f"The rules remove {first.total - first.allowed} of the {first.total} combinations, each for its "
                  "reason (docs/suites.md):", table(removed, numparse=False)]
    if explorations:
        rows = [{"implementation": e.impl, "triples run": e.triples, "drawn": e.searched, "runs": e.runs,
                 "seconds": e.seconds, "findings": len(e.findings), "known": len(e.expected),
                 "stopped by": e.stopped_by} for e in explorations]
        parts += ["The search past the covering arrays (pytest suites/multigpu --explore), each finding shrunk to "
                  "the axes that must combine:", table(rows, numparse=False)]
        for e in explorations:
            for f in e.findings:
                known = f" Known: {e.expected[f.composition]}" if f.composition in e.expected else ""
                parts.append(f"- **{e.impl}**: `{f.reproduce(e.impl)}` — the axes that must combine: {f.axes()}; "
                             f"{f.message}.{known}")
    return "\n\n".join(parts)


def strength_markdown(records: Sequence[StrengthRecord]) -> str:
    per_suite: dict[str, list[bool]] = {}
    for r in records:
        per_suite.setdefault(r.suite, []).append(r.caught)
    shares = [{"suite": s, "broken implementations": len(v), "caught": sum(v),
               "share caught": f"{100 * sum(v) / len(v):.0f}%"} for s, v in per_suite.items()]
    rows = [{"broken": r.broken, "bug": r.bug, "suite": r.suite, "caught": r.caught,
             "expected_tests_failed": r.expected_tests_failed, "failing_tests": r.failing_tests,
             "crashed_tests": r.crashed_tests, "caught_by": r.caught_by} for r in records]
    return table(rows) + "\n\n" + table(shares)
