"""The run's verdict, decided once, when the run is written: what its report says and what the job exits with.

It covers the implementations the user gates (``covered``: those asked for with
``--impl``, else the reference; the reference whenever it ran). For them it
fails on a conformance run that did not pass (``SuiteRun.status``: a failed or
erroring check, a suite that did not run, or one that collected nothing) and
on a finding of the search past the covering arrays that the implementation's
expectations do not record. Every other implementation's failures and new
findings are reported, never failed: the search draws new compositions, and a
peer's bug that was always there must not fail a user's own implementation on
the night it is drawn. It also fails on a wrong element in any collective's
result, and, under ``--fail-on-regression``, on a gated regression against
the previous run of the same setup. A comparison that could not be made (an
earlier run that cannot be read) is an error of its own, and so is each
benchmark that raised: the run is written with what finished. A suite run of which
every check was skipped is not applicable: it passes nothing and fails
nothing. Each line is a typed value (its kind and status); the writers word
it, and no decision is read back from the words.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.registry import BenchmarkFault

from ..store.model import Comparison, Results, Verdict, VerdictLine

REFERENCE = "reference"


def covered(asked: Sequence[str] | None, ran: Sequence[str]) -> tuple[str, ...]:
    """The implementations a verdict covers: those asked for (``--impl``), else the reference; and the reference
    whenever it ``ran``."""
    chosen = list(asked) if asked else [REFERENCE]
    return tuple(dict.fromkeys([*chosen, *([REFERENCE] if REFERENCE in ran else [])]))


def decide(results: Results, fail_on_regression: bool, covers: Sequence[str] = (REFERENCE,)) -> Verdict:
    lines = []
    for r in results.conformance:
        why = r.why()
        status = _covered(r.status, r.impl in covers)
        lines.append(VerdictLine("conformance", status, f"{r.suite} against {r.label}: {r.passed} passed, "
                                 f"{r.failed + r.errors} failed, {r.skipped} skipped" + (f" ({why})" if why else "")
                                 + _not_covered(r.impl, status)))
    if not results.conformance:
        lines.append(VerdictLine("conformance", "pass", "conformance: not run"))
    for e in results.explorations:
        unexpected = [f for f in e.findings if f.composition not in e.expected]
        known = f", {len(e.expected)} known" if e.expected else ""
        status = _covered("fail" if unexpected else "pass", e.impl in covers)
        lines.append(VerdictLine("search", status,
                                 f"search past the covering arrays against {e.impl}: {len(unexpected)} findings"
                                 f"{known} in {e.triples + e.searched} compositions ({e.seconds:.0f} s)"
                                 + _not_covered(e.impl, status)))
    for f in results.benchmark_faults:
        lines.append(VerdictLine("benchmarks", "reported" if f.recovered else "error", _fault(f)))
    wrong = sum(r.wrong for r in results.benchmarks.busbw)
    lines.append(VerdictLine("collectives", "fail" if wrong else "pass",
                             f"collectives' results: {wrong} wrong elements"))
    lines.append(_gate(results.comparison, fail_on_regression))
    return Verdict(tuple(lines), fail_on_regression, tuple(covers))


def _fault(f: BenchmarkFault) -> str:
    if f.recovered:
        return (f"benchmark {f.benchmark}: {f.error}; it ran again on fresh ranks to its end, and its records are "
                "that run's (reported, not failed: a crash below Python that did not come back)")
    if f.relaunch is not None:
        return (f"benchmark {f.benchmark} raised on its launch {f.relaunch}: {f.error}; that launch's rounds are left "
                "out, the earlier launches' kept")
    where = f"on rank {f.rank}" if f.rank is not None else "in the report's process"
    after = f"; after it on that rank {', '.join(f.skipped)} did not run" if f.skipped else ""
    return f"benchmark {f.benchmark} raised {where}: {f.error}; its records are left out{after}"


def _covered(status: str, covered_: bool) -> str:
    """A failing status of an implementation the verdict does not cover is reported instead."""
    return "reported" if status == "fail" and not covered_ else status


def _not_covered(impl: str, status: str) -> str:
    return (f" (reported, not failed: the verdict does not cover {impl}; record it in its expectation list or "
            "report it upstream)") if status == "reported" else ""


def _gate(comparison: Comparison | None, fail_on_regression: bool) -> VerdictLine:
    if comparison is not None and comparison.error is not None:
        return VerdictLine("gate", "error",
                           f"gated regressions: not checked, an earlier run cannot be read: {comparison.error}")
    if comparison is None or comparison.against is None:
        return VerdictLine("gate", "pass", "gated regressions: none checked (no earlier run of this setup)")
    keys = [c.key for c in comparison.regressions]
    status = "fail" if fail_on_regression and keys else "reported" if keys else "pass"
    return VerdictLine("gate", status, f"gated regressions against {comparison.against}: {len(keys)}"
                       + (f" ({', '.join(keys)})" if keys else "")
                       + (" (reported; --fail-on-regression would fail)" if status == "reported" else ""))
