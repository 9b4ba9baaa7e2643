"""The conformance runs and the suite-strength runs as markdown."""

from __future__ import annotations

from typing import Sequence

from ..conformance.records import StrengthPhase, StrengthRecord, SuiteRun
from ..views.compositions import CompositionsView
from .table import table


def _named(run: SuiteRun) -> str:
    """The implementation as the suite named it, with its levels; the name asked for where the suite did not start."""
    return f"{run.label} (levels: {', '.join(run.levels) or 'none'})" if run.implementation else run.impl


def conformance_markdown(results: Sequence[SuiteRun]) -> str:
    """One row per (suite, implementation), then each run's failures and skip reasons."""
    rows = [
        {"suite": r.suite, "implementation": _named(r), "passed": r.passed,
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
        rows = [{"implementation": s.implementation, "budget (s)": "-" if s.budget is None else f"{s.budget:g}",
                 "seconds": s.seconds, "triples run": s.triples, "drawn": s.drawn, "runs": s.runs,
                 "findings": s.findings, "known": s.known, "known, not run": s.known_skipped,
                 "stopped by": s.stopped_by, "seed": "-" if s.seed is None else s.seed}
                for s in view.searches]
        parts += ["The search past the covering arrays (pytest suites/multigpu --explore), each finding shrunk to "
                  "the axes that must combine; compositions the expectation lists record as known failures are not "
                  "run. The same seed, budget and example database draw the same compositions:",
                  table(rows, numparse=False),
                  "\n".join(f"- {s.implementation}: `{s.rerun}`" for s in view.searches)]
        parts += [f"- **{f.implementation}**: `{f.reproduce}` — the axes that must combine: {f.axes}; {f.message}."
                  + ("" if f.shrunk else " (Shrinking was cut short by the budget.)")
                  + (f" Known: {f.known}" if f.known else f" New: {f.advice}.") for f in view.findings]
    return "\n\n".join(parts)


def strength_markdown(records: Sequence[StrengthRecord], phase: StrengthPhase | None) -> str:
    """The strength table, with where each row was measured and caught, and the shares caught per suite."""
    per_suite: dict[str, list[bool]] = {}
    for r in records:
        per_suite.setdefault(r.suite, []).append(r.caught)
    shares = [{"suite": s, "broken implementations": len(v), "caught": sum(v),
               "share caught": f"{100 * sum(v) / len(v):.0f}%"} for s, v in per_suite.items()]
    rows = [{"broken": r.broken, "bug": r.bug, "suite": r.suite, "caught": CAUGHT_WORDS[r.caught_in],
             "expected_tests_failed": r.expected_tests_failed, "failing_tests": r.failing_tests,
             "crashed_tests": r.crashed_tests, "caught_by": r.caught_by, "measured in": r.measured_in or "this run"}
            for r in records]
    parts = [strength_phase_sentence(phase)] if phase is not None else []
    return "\n\n".join([*parts, table(rows), table(shares)])


CAUGHT_WORDS = {"suite": "yes", "triples": "by the triples, not by the pairs", "nowhere": "no"}
"""Where a broken implementation was caught (``StrengthRecord.caught_in``), as the strength table words it."""


def strength_phase_sentence(phase: StrengthPhase) -> str:
    not_yet = phase.catalogue - phase.measured - phase.carried
    budget = "every entry" if phase.budget is None else f"within its budget of {phase.budget:g} s"
    return (f"{phase.measured} of the {phase.catalogue} broken implementations measured in this run ({budget}, "
            f"{phase.seconds:g} s), those never measured first, then the longest ago; {phase.carried} carried over "
            "from the runs that measured them (the last column)"
            + (f"; {not_yet} not measured yet (a later run measures them)" if not_yet else "")
            + f". {phase.proven_by} proves each caught by the tests its entry names on every commit.")
