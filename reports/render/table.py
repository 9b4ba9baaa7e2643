"""The report's one table helper, its one cell of a figure, and its one byte formatter.

Every table in report.md is a github table from ``table``; every figure in a
table reads ``median [low, high]`` through ``cell`` (or why it was not
measured); every byte count reads like ``38.19 MiB`` through ``bytes_label``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tabulate import tabulate

from benchmarks.measurable import Refusal
from benchmarks.sampling import Sampled, TargetOutcome
from benchmarks.stats import UNSTABLE_FOOTNOTE, Figure, Summary, describe

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


def holds_unstable(value: Any) -> bool:
    """Whether ``value`` (a record, a figure, or containers of them) holds a figure ``describe`` marks unstable."""
    if isinstance(value, (Figure, Summary)):
        return value.unstable
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(holds_unstable(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return any(holds_unstable(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(holds_unstable(v) for v in value)
    return False


def with_unstable_footnote(section: str, shown: Any) -> str:
    """A report section, with the one footnote explaining the unstable mark when the figures it shows (``shown``)
    hold one that carries it."""
    return f"{section}\n\n{UNSTABLE_FOOTNOTE}" if holds_unstable(shown) else section


def cell(figure: Figure | None, refused: Refusal | None = None) -> str:
    """A figure as one cell (``describe``), or why it was refused."""
    if figure is None:
        return str(refused) if refused else "null"
    return describe(figure)


def sampling_note(sampled: Sampled | None) -> str:
    """How a figure's rounds were taken, in one sentence (``benchmarks.sampling``'s record)."""
    if not sampled:
        return ""
    settled = {True: ", settled", False: ", not settled", None: ""}[sampled.warmup_settled]
    launches = f" in {sampled.launches} launches of fresh ranks" if sampled.launches > 1 else ""
    text = (f"{sampled.rounds} rounds after {sampled.warmup} warm-up{launches}{settled}; stopped: "
            f"{sampled.stopped} ({sampled.seconds:.3g} s")
    text += f" of a {sampled.budget_s:g} s budget)" if sampled.stopped != "fixed rounds" else ")"
    missed = [f"{key} {t.target} (reached {_reached(t)})" for key, t in sampled.targets.items() if not t.met]
    if sampled.targets:
        text += "; targets met" if not missed else f"; targets missed: {', '.join(missed)}"
    return text + "."


def _reached(target: TargetOutcome) -> str:
    if target.achieved is None:
        return "no interval yet"
    return f"±{target.achieved:.1%}" if target.kind == "relative" else f"±{target.achieved:.3g}"
