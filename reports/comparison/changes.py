"""What changed between two runs' metrics: the nightly gate, which must not cry wolf.

Only the flat ``metrics`` of ``results.json`` are compared (reports/schema.md).
Each metric says itself whether bigger is better, whether it is *gated* (a
headline figure whose regression fails the job) or informative, and either
carries the samples it was measured from or is *exact* (a count).

- Metrics with samples in both runs: a change counts only when it is
  statistically significant **and** larger than the practical threshold. The
  test is Mann-Whitney's U on the two runs' samples (Google Benchmark's
  compare.py does the same over repetitions); its p-values are corrected for
  the number of metrics compared with Benjamini-Hochberg, separately for the
  gated and the informative metrics, at a false discovery rate of ``alpha``.
  The threshold is relative (default 10%) for quantities and absolute
  (default 0.05) for efficiencies, whose figures say ``spread_kind:
  "absolute"``; a metric that carries its own (a gated figure's gate rule,
  ``benchmarks.sampling.GATE_RULES``; absolute times) uses that one.
- Exact metrics (test counts, caught bugs, wrong elements): any move in the
  bad direction is a regression.
- A metric without samples on one side (a run written before schema 2):
  the old rule, a move beyond the threshold, with a note saying so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

from scipy import stats

from benchmarks.stats import BETTER, Figure

from ..store.runs import load_results

ALPHA = 0.05


DEFAULT_THRESHOLD = 0.10


DEFAULT_ABSOLUTE_THRESHOLD = 0.05


# Runs written before metrics said whether they are exact: these prefixes are counts.
DEFAULT_PREFIX_THRESHOLDS: dict[str, float] = {"conformance/": 0.0}


STATUS_ORDER = ("regression", "improvement", "unchanged", "added", "removed")


FAMILIES = ("gated", "informative")


@dataclass(frozen=True)
class Change:
    """One metric across two runs.

    ``relative`` is None when it has no meaning (old is 0 or absent);
    ``test`` says how the verdict was reached: "mann-whitney", "exact" or
    "threshold" (no samples on one side); ``p_adjusted`` is the
    Benjamini-Hochberg p-value within the metric's family.
    """

    key: str
    old: float | None
    new: float | None
    unit: str
    better: str
    relative: float | None
    status: str
    threshold: float
    gated: bool = True
    test: str = "threshold"
    p_value: float | None = None
    p_adjusted: float | None = None
    absolute: bool = False
    old_figure: Figure | None = None
    new_figure: Figure | None = None

    @property
    def family(self) -> str:
        return "gated" if self.gated else "informative"


@dataclass(frozen=True)
class Entry:
    """One run's side of a metric, read and checked."""

    value: float
    unit: str
    better: str
    gated: bool
    exact: bool
    figure: Figure | None
    threshold: float | None


def merged_thresholds(thresholds: Mapping[str, float] | None) -> dict[str, float]:
    """Caller's prefixes over the defaults, so the conformance rule is only dropped on purpose."""
    merged = {**DEFAULT_PREFIX_THRESHOLDS, **(thresholds or {})}
    for prefix, value in merged.items():
        if value < 0:
            raise ValueError(f"got threshold {value} for prefix {prefix!r}, but should be >= 0")
    return merged


def threshold_for(key: str, threshold: float, prefixes: Mapping[str, float]) -> float:
    """The longest matching prefix wins, so a narrow rule can override a broad one."""
    matches = [p for p in prefixes if key.startswith(p)]
    return prefixes[max(matches, key=len)] if matches else threshold


def read_entry(key: str, entry, run: str) -> Entry:
    if not isinstance(entry, dict):
        raise ValueError(f"got {entry!r} for metric {key!r} in the {run} run, but should be an object")
    value = entry.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"got value {value!r} for metric {key!r} in the {run} run, but should be a number")
    better = entry.get("better")
    if better not in BETTER:
        raise ValueError(f"got better={better!r} for metric {key!r} in the {run} run, but should be one of {BETTER}")
    figure = None
    if isinstance(entry.get("figure"), dict):
        try:
            figure = Figure.from_json(entry["figure"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"got an unreadable figure for metric {key!r} in the {run} run ({exc})") from exc
    # Before schema 2 nothing was gated or exact: every metric could fail the job, as then.
    threshold = entry.get("threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or threshold < 0):
        raise ValueError(f"got threshold {threshold!r} for metric {key!r} in the {run} run, "
                         "but should be a number >= 0")
    return Entry(float(value), entry.get("unit", ""), better, bool(entry.get("gated", True)),
                 bool(entry.get("exact", False)), figure, None if threshold is None else float(threshold))


def _same(key: str, field: str, old: Entry, new: Entry) -> None:
    """A metric whose meaning changed between runs cannot be compared."""
    a, b = getattr(old, field), getattr(new, field)
    if a != b:
        raise ValueError(f"got {field}={b!r} for metric {key!r} in the new run and {a!r} in the old one, "
                         f"but should be the same in both runs")


def classify(old: float, new: float, better: str, threshold: float, absolute: bool = False
             ) -> tuple[str, float | None]:
    """Status and relative change of a move; from 0 any bad move regresses (e.g. 0 -> 1 failures)."""
    if not (math.isfinite(old) and math.isfinite(new)):
        return _classify_non_finite(old, new), None
    sign = 1.0 if better == "higher" else -1.0
    relative = (new - old) / abs(old) if old else None
    if absolute:
        gain = sign * (new - old)
    elif relative is None:
        gain = sign * new
        return ("regression" if gain < 0 else "improvement" if gain > 0 else "unchanged"), None
    else:
        gain = sign * relative
    if gain < -threshold:
        return "regression", relative
    if gain > threshold:
        return "improvement", relative
    return "unchanged", relative


def _classify_non_finite(old: float, new: float) -> str:
    """NaN or inf is a lost measurement: losing one is a regression, regaining one an improvement."""
    if math.isfinite(old):
        return "regression"
    if math.isfinite(new):
        return "improvement"
    return "unchanged"


def mann_whitney(old: Figure, new: Figure) -> float:
    """Two-sided p-value that the two runs' samples come from one distribution."""
    if set(old.samples) == set(new.samples) and len(set(old.samples)) == 1:
        return 1.0  # identical constant samples: nothing to test
    return float(stats.mannwhitneyu(old.samples, new.samples, alternative="two-sided").pvalue)


def compare_metrics(old: Mapping[str, dict], new: Mapping[str, dict], threshold: float = DEFAULT_THRESHOLD,
                    thresholds: Mapping[str, float] | None = None, alpha: float = ALPHA,
                    absolute_threshold: float = DEFAULT_ABSOLUTE_THRESHOLD, gate: Sequence[str] = ()
                    ) -> list[Change]:
    """Every metric of either run, sorted by key (see the module docstring for the rules).

    ``thresholds`` maps key prefixes to their own relative threshold, on top of DEFAULT_PREFIX_THRESHOLDS;
    ``gate`` lists key prefixes of informative metrics to gate too (on hardware quiet enough for them).
    """
    for name, value in (("threshold", threshold), ("absolute_threshold", absolute_threshold)):
        if value < 0:
            raise ValueError(f"got {name} {value}, but should be >= 0")
    if not 0 < alpha < 1:
        raise ValueError(f"got alpha {alpha}, but should be between 0 and 1")
    prefixes = merged_thresholds(thresholds)
    changes: dict[str, Change] = {}
    tested: dict[str, list[tuple[str, float]]] = {family: [] for family in FAMILIES}
    for key in sorted(set(old) | set(new)):
        if key not in new or key not in old:
            status, side, entry = ("removed", "old", old[key]) if key not in new else ("added", "new", new[key])
            e = read_entry(key, entry, side)
            values = (e.value, None) if status == "removed" else (None, e.value)
            changes[key] = Change(key, *values, e.unit, e.better, None, status, _limit(key, e, threshold, prefixes),
                                  e.gated, "-")
            continue
        a, b = read_entry(key, old[key], "old"), read_entry(key, new[key], "new")
        for field in ("better", "unit"):
            _same(key, field, a, b)
        if any(key.startswith(prefix) for prefix in gate):
            b = replace(b, gated=True)
        changes[key] = _compare_one(key, a, b, _limit(key, b, threshold, prefixes),
                                    absolute_threshold if b.threshold is None else b.threshold)
        if changes[key].test == "mann-whitney":
            tested[changes[key].family].append((key, changes[key].p_value))
    for family, pairs in tested.items():
        if not pairs:
            continue
        adjusted = stats.false_discovery_control([p for _, p in pairs])
        for (key, _), p_adj in zip(pairs, adjusted):
            changes[key] = _judge(changes[key], float(p_adj), alpha)
    return [changes[k] for k in sorted(changes)]


def _limit(key: str, entry: Entry, default: float, prefixes: Mapping[str, float]) -> float:
    """A prefix the caller gave wins; then the metric's own practical threshold (the newer run's); then the
    default."""
    return threshold_for(key, default if entry.threshold is None else entry.threshold, prefixes)


def _compare_one(key: str, a: Entry, b: Entry, limit: float, absolute_limit: float) -> Change:
    gated = b.gated
    if _testable(a.figure) and _testable(b.figure):
        absolute = b.figure.spread_kind == "absolute"
        relative = (b.value - a.value) / abs(a.value) if a.value else None
        return Change(key, a.value, b.value, b.unit, b.better, relative, "unchanged",
                      absolute_limit if absolute else limit, gated, "mann-whitney",
                      mann_whitney(a.figure, b.figure), None, absolute, a.figure, b.figure)
    if b.exact:
        status, relative = classify(a.value, b.value, b.better, 0.0)
        return Change(key, a.value, b.value, b.unit, b.better, relative, status, 0.0, gated, "exact")
    status, relative = classify(a.value, b.value, b.better, limit)
    return Change(key, a.value, b.value, b.unit, b.better, relative, status, limit, gated, "threshold",
                  old_figure=a.figure, new_figure=b.figure)


def _testable(figure: Figure | None) -> bool:
    """Samples a rank test can use: present and finite (a lost measurement is judged by the threshold rule)."""
    return figure is not None and all(math.isfinite(s) for s in figure.samples)


def _judge(change: Change, p_adjusted: float, alpha: float) -> Change:
    """Significant and beyond the threshold, in either direction; otherwise unchanged."""
    status = "unchanged"
    if p_adjusted < alpha:
        status, _ = classify(change.old, change.new, change.better, change.threshold, change.absolute)
    return Change(**{**change.__dict__, "status": status, "p_adjusted": p_adjusted})


def compare_runs(old_dir: Path, new_dir: Path, threshold: float = DEFAULT_THRESHOLD,
                 thresholds: Mapping[str, float] | None = None, alpha: float = ALPHA,
                 gate: Sequence[str] = ()) -> list[Change]:
    """Compare the metrics of two run directories."""
    old, new = load_results(Path(old_dir)), load_results(Path(new_dir))
    return compare_metrics(old["metrics"], new["metrics"], threshold, thresholds, alpha, gate=gate)


def gated_regressions(changes: Sequence[Change]) -> list[Change]:
    return [c for c in changes if c.gated and c.status == "regression"]
