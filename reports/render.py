"""The report's one table helper and one byte formatter, and the conformance section.

Every table in report.md is a github table from ``table``; every byte count
reads like ``38.19 MiB`` through ``bytes_label``.
"""

from __future__ import annotations

import re
from typing import Any

from tabulate import tabulate

from benchmarks.stats import UNSTABLE_FOOTNOTE, UNSTABLE_MARK

BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def table(rows: Any, headers: Any = "keys", floatfmt: str = ".4g", numparse: bool = True) -> str:
    """A github table; ``numparse=False`` keeps text cells as written ('4.0' stays '4.0')."""
    if not rows:
        return "(none)"
    return tabulate(rows, headers=headers, tablefmt="github", floatfmt=floatfmt, disable_numparse=not numparse)


def bytes_label(size_bytes: float, _pos: Any = None) -> str:
    """Binary units, 4 significant digits: 1 KiB, 38.19 MiB, 1.5 GiB (also a matplotlib tick formatter)."""
    value, unit = float(size_bytes), 0
    while abs(value) >= 1024 and unit < len(BINARY_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:.4g} {BINARY_UNITS[unit]}"


_MARKED_CELL = re.compile(rf"{re.escape(UNSTABLE_MARK)}\s*\|")


def with_unstable_footnote(section: str) -> str:
    """A report section, with the one footnote explaining the unstable mark when a table cell of it carries it."""
    return f"{section}\n\n{UNSTABLE_FOOTNOTE}" if _MARKED_CELL.search(section) else section


def conformance_markdown(results: list) -> str:
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
