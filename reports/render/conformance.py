"""The conformance runs and the suite-strength runs as markdown."""

from __future__ import annotations

from typing import Sequence

from ..conformance.records import StrengthRecord, SuiteRun
from ..views.compositions import CompositionsView
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


def compositions_markdown(view: CompositionsView) -> str:
    """How much of the configuration space each implementation's compositions covered, what the rules removed,
    and what the search past the covering arrays found, each finding with the line that reproduces it."""
    if view.empty:
        return "No composition ran (the multi-rank suite was not run)."
    parts = []
    if view.coverage:
        rows = [{"implementation": c.implementation, "set": c.name, "compositions run": c.run,
                 "covered": f"{c.covered} of {c.expressible}" + (" (all)" if c.complete else ""),
                 "it can express": c.expressible, "the rules allow": c.allowed, "in all": c.total}
                for c in view.coverage]
        first = view.coverage[0]
        removed = [{"removed by": " + ".join(x.rules), "combinations": x.count, "e.g.": x.example}
                   for x in view.removals]
        parts += ["Combinations of axis values (suites/multigpu/space.py) that the compositions which ran contain, "
                  "among those each implementation can express:", table(rows, numparse=False),
                  f"The rules remove {first.total - first.allowed} of the {first.total} combinations, each for its "
                  "reason (docs/suites.md):", table(removed, numparse=False)]
    if view.searches:
        rows = [{"implementation": s.implementation, "triples run": s.triples, "drawn": s.drawn, "runs": s.runs,
                 "seconds": s.seconds, "findings": s.findings, "known": s.known, "stopped by": s.stopped_by}
                for s in view.searches]
        parts += ["The search past the covering arrays (pytest suites/multigpu --explore), each finding shrunk to "
                  "the axes that must combine:", table(rows, numparse=False)]
        parts += [f"- **{f.implementation}**: `{f.reproduce}` — the axes that must combine: {f.axes}; {f.message}."
                  + (f" Known: {f.known}" if f.known else "") for f in view.findings]
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
