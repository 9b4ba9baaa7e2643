"""The run's verdict, decided once, when the run is written: what its report says and what the job exits with.

It fails on a conformance run that did not pass (``SuiteRun.ok``: a failed or
erroring check, or a suite that did not run), on a wrong element in any
collective's result, and, under ``--fail-on-regression``, on a gated
regression against the previous run of the same setup. A comparison that
could not be made (an earlier run that cannot be read) is an error of its own.
"""

from __future__ import annotations

from ..store.model import Comparison, Results, Verdict, VerdictLine


def decide(results: Results, fail_on_regression: bool) -> Verdict:
    lines = []
    for r in results.conformance:
        failed = r.failed + r.errors
        lines.append(VerdictLine(f"{r.suite} against {r.label}: {r.passed} passed, {failed} failed, "
                                 f"{r.skipped} skipped", not r.ok))
    if not results.conformance:
        lines.append(VerdictLine("conformance: not run", False))
    wrong = sum(r.wrong for r in results.benchmarks.busbw)
    lines.append(VerdictLine(f"collectives' results: {wrong} wrong elements", wrong != 0))
    lines.append(_gate(results.comparison, fail_on_regression))
    return Verdict(tuple(lines), fail_on_regression)


def _gate(comparison: Comparison | None, fail_on_regression: bool) -> VerdictLine:
    if comparison is not None and comparison.error is not None:
        return VerdictLine(f"gated regressions: not checked, an earlier run cannot be read: {comparison.error}", True,
                           True)
    if comparison is None or comparison.against is None:
        return VerdictLine("gated regressions: none checked (no earlier run of this setup)", False)
    keys = [c.key for c in comparison.regressions]
    return VerdictLine(f"gated regressions against {comparison.against}: {len(keys)}"
                       + (f" ({', '.join(keys)})" if keys else "")
                       + ("" if fail_on_regression or not keys else " (reported; --fail-on-regression would fail)"),
                       fail_on_regression and bool(keys))
