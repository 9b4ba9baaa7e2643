"""The first screen of the report: the verdict, the headline figures with their intervals, what is unstable.

The verdict is what the nightly job decides on: conformance per
implementation (any failed check fails it), wrong results of the collectives,
and the gated regressions against the previous run of the same setup. The
headline figures are the gated ones, each with its 95% interval; every figure
whose spread passes its limit is listed once here, so the tables below can
mark it with a single sign.
"""

from __future__ import annotations

from benchmarks.stats import UNSTABLE_MARK, Figure, describe

from .matrix import impl_label
from .table import table


def verdict(results: dict) -> tuple[bool, list[str]]:
    """(pass, one line per reason it fails or per thing it checked)."""
    lines, ok = [], True
    for r in results.get("conformance", []):
        failed = r["failed"] + r["errors"]
        good = failed == 0 and r["exit_code"] in (0, 5)
        ok &= good
        lines.append(f"{r['suite']} against {impl_label(r['header'], r['impl'])}: {r['passed']} passed, {failed} failed, "
                     f"{r['skipped']} skipped{'' if good else ' — FAIL'}")
    if not results.get("conformance"):
        lines.append("conformance: not run")
    wrong = sum(r["wrong"] for r in results.get("busbw", []))
    ok &= wrong == 0
    lines.append(f"collectives' results: {wrong} wrong elements" + ("" if wrong == 0 else " — FAIL"))
    compared = results.get("compared_with") or {}
    if compared.get("run"):
        regressions = compared.get("gated_regressions", [])
        lines.append(f"gated regressions against {compared['run']}: {len(regressions)}"
                     + (f" ({', '.join(regressions)})" if regressions else ""))
    else:
        lines.append("gated regressions: none checked (no earlier run of this setup)")
    return ok, lines


def headline_rows(metrics: dict) -> list[dict]:
    """Every gated metric with samples: the figures the gate judges."""
    rows = []
    for key, metric in sorted(metrics.items()):
        if metric.get("gated") and isinstance(metric.get("figure"), dict):
            rows.append({"figure": key, "median [95% interval]": describe(Figure.from_json(metric["figure"])),
                         "unit": metric.get("unit", ""), "better": metric.get("better", "")})
    return rows


def unstable_keys(metrics: dict) -> list[str]:
    return sorted(k for k, m in metrics.items() if isinstance(m.get("figure"), dict) and m["figure"].get("unstable"))


def summary_markdown(results: dict) -> str:
    ok, lines = verdict(results)
    smoke = (results.get("run") or {}).get("smoke")
    head = f"**Verdict: {'PASS' if ok else 'FAIL'}**" + (" (smoke run: the figures mean nothing)" if smoke else "")
    parts = [head + "\n\n" + "\n".join(f"- {line}" for line in lines)]
    rows = headline_rows(results.get("metrics", {}))
    if rows:
        parts.append("Headline figures (gated):\n\n" + table(rows, numparse=False))
    unstable = unstable_keys(results.get("metrics", {}))
    parts.append(f"Unstable figures ({UNSTABLE_MARK}): {len(unstable)}"
                 + (": " + ", ".join(unstable) if unstable else "."))
    return "\n\n".join(parts)
