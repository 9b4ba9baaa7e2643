"""The conformance runs and the suite-strength runs as markdown."""

from __future__ import annotations

from typing import Sequence

from ..conformance.strength import StrengthRecord
from ..conformance.suites import SuiteRun
from .table import table


def conformance_markdown(results: Sequence[SuiteRun]) -> str:
    """One row per (suite, implementation), then each run's failures and skip reasons."""
    rows = [
        {"suite": r.suite, "implementation": r.header or r.impl, "passed": r.passed,
         "failed": r.failed + r.errors, "skipped": r.skipped, "xfailed": r.xfailed,
         "verdict": "PASS" if r.ok else "FAIL"}
        for r in results
    ]
    text = table(rows)
    for r in results:
        if r.failures:
            text += f"\n\nFailures of {r.impl} in {r.suite}:\n" + "\n".join(f"- {f}" for f in r.failures[:20])
        if r.skip_reasons:
            reasons = sorted(r.skip_reasons.items(), key=lambda kv: -kv[1])
            text += f"\n\nSkips of {r.impl} in {r.suite} (count: reason):\n" + "\n".join(
                f"- {n}: {reason}" for reason, n in reasons
            )
    return text


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
