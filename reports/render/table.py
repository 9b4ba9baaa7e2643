"""The report's one table helper, its one cell of a figure, and its one byte formatter.

Every table in report.md is a github table from ``table``; every figure in a
table reads ``median [low, high]`` through ``cell`` (or why it was not
measured); every byte count reads like ``38.19 MiB`` through ``bytes_label``.
"""

from __future__ import annotations

import re
from typing import Any

from tabulate import tabulate

from benchmarks.registry import figure_of
from benchmarks.stats import UNSTABLE_FOOTNOTE, UNSTABLE_MARK, describe

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


def cell(record: dict, name: str) -> str:
    """A record's figure as one cell (``describe``), or why it was not measured where the record says so."""
    if record.get(name) is None:
        why = record.get("why_not_measurable")
        return f"not measurable here: {why}" if why else "null"
    return describe(figure_of(record, name))
