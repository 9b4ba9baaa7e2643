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
- A metric without samples on one side (a run written before figures kept
  their samples): a move beyond the threshold, with a note saying so.

Old runs reach this module upgraded (``reports.store.upgrade``): it reads the
current ``Metric`` alone.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping, Sequence

from benchmarks.registry import Metric
from benchmarks.stats import Figure

from ..store.model import Change, Comparison

ALPHA = 0.05
DEFAULT_THRESHOLD = 0.10
DEFAULT_ABSOLUTE_THRESHOLD = 0.05
STATUS_ORDER = ("regression", "improvement", "unchanged", "added", "removed")
FAMILIES = ("gated", "informative")


def check_thresholds(threshold: float, thresholds: Mapping[str, float] | None = None, alpha: float = ALPHA,
                     absolute_threshold: float = DEFAULT_ABSOLUTE_THRESHOLD) -> None:
    """Refuse a threshold below 0 or a false discovery rate outside (0, 1), naming it: what every command checks
    before it starts."""
    for name, value in (("threshold", threshold), ("absolute threshold", absolute_threshold),
                        *((f"threshold of prefix {k!r}", v) for k, v in (thresholds or {}).items())):
        if not value >= 0:
            raise ValueError(f"{name}: got {value}, but should be >= 0")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: got {alpha}, but should be between 0 and 1")


def threshold_for(key: str, threshold: float, prefixes: Mapping[str, float]) -> float:
    """The longest matching prefix wins, so a narrow rule can override a broad one."""
    matches = [p for p in prefixes if key.startswith(p)]
    return prefixes[max(matches, key=len)] if matches else threshold


def _same(key: str, field: str, old: Metric, new: Metric) -> None:
    """A metric whose meaning changed between runs cannot be compared."""
    a, b = getattr(old, field), getattr(new, field)
    if a != b:
        raise ValueError(f"metric {key!r}: got {field}={b!r} in the new run and {a!r} in the old one, "
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
    from scipy import stats  # here: the trend and the site read this module's thresholds without scipy

    return float(stats.mannwhitneyu(old.samples, new.samples, alternative="two-sided").pvalue)


def compare_metrics(old: Mapping[str, Metric], new: Mapping[str, Metric], threshold: float = DEFAULT_THRESHOLD,
                    thresholds: Mapping[str, float] | None = None, alpha: float = ALPHA,
                    absolute_threshold: float = DEFAULT_ABSOLUTE_THRESHOLD, gate: Sequence[str] = ()
                    ) -> list[Change]:
    """Every metric of either run, sorted by key (see the module docstring for the rules).

    ``thresholds`` maps key prefixes to their own relative threshold; ``gate`` lists key prefixes of informative
    metrics to gate too (on hardware quiet enough for them).
    """
    check_thresholds(threshold, thresholds, alpha, absolute_threshold)
    prefixes = dict(thresholds or {})
    changes: dict[str, Change] = {}
    tested: dict[str, list[tuple[str, float]]] = {family: [] for family in FAMILIES}
    for key in sorted(set(old) | set(new)):
        if key not in new or key not in old:
            status, e = ("removed", old[key]) if key not in new else ("added", new[key])
            values = (e.value, None) if status == "removed" else (None, e.value)
            changes[key] = Change(key, *values, e.unit, e.better, None, status, _limit(key, e, threshold, prefixes),
                                  e.gated, "-")
            continue
        a, b = old[key], new[key]
        for field in ("better", "unit"):
            _same(key, field, a, b)
        if any(key.startswith(prefix) for prefix in gate):
            b = replace(b, gated=True)
        changes[key] = _compare_one(key, a, b, _limit(key, b, threshold, prefixes),
                                    absolute_threshold if b.threshold is None else b.threshold)
        if changes[key].test == "mann-whitney":
            tested[changes[key].family].append((key, changes[key].p_value))
    from scipy import stats

    for family, pairs in tested.items():
        if not pairs:
            continue
        adjusted = stats.false_discovery_control([p for _, p in pairs])
        for (key, _), p_adj in zip(pairs, adjusted):
            changes[key] = _judge(changes[key], float(p_adj), alpha)
    return [changes[k] for k in sorted(changes)]


def compare(against: str | None, old: Mapping[str, Metric] | None, new: Mapping[str, Metric],
            passed_over: Sequence[str] = (), threshold: float = DEFAULT_THRESHOLD,
            thresholds: Mapping[str, float] | None = None, alpha: float = ALPHA, gate: Sequence[str] = ()
            ) -> Comparison:
    """The gate's decisions for a run against the earlier run ``against`` (None: nothing to compare with)."""
    changes = () if old is None else tuple(compare_metrics(old, new, threshold, thresholds, alpha, gate=gate))
    return Comparison(against, tuple(passed_over), threshold, alpha, changes)


def _limit(key: str, metric: Metric, default: float, prefixes: Mapping[str, float]) -> float:
    """A prefix the caller gave wins; then the metric's own practical threshold (the newer run's); then the
    default."""
    return threshold_for(key, default if metric.threshold is None else metric.threshold, prefixes)


def _summary(figure: Figure | None):
    return None if figure is None else figure.summary()


def _compare_one(key: str, a: Metric, b: Metric, limit: float, absolute_limit: float) -> Change:
    gated = b.gated
    if _testable(a.figure) and _testable(b.figure):
        absolute = b.figure.spread_kind == "absolute"
        relative = (b.value - a.value) / abs(a.value) if a.value else None
        return Change(key, a.value, b.value, b.unit, b.better, relative, "unchanged",
                      absolute_limit if absolute else limit, gated, "mann-whitney",
                      mann_whitney(a.figure, b.figure), None, absolute, a.figure.summary(), b.figure.summary())
    if b.exact:
        status, relative = classify(a.value, b.value, b.better, 0.0)
        return Change(key, a.value, b.value, b.unit, b.better, relative, status, 0.0, gated, "exact")
    status, relative = classify(a.value, b.value, b.better, limit)
    return Change(key, a.value, b.value, b.unit, b.better, relative, status, limit, gated, "threshold",
                  old_figure=_summary(a.figure), new_figure=_summary(b.figure))


def _testable(figure: Figure | None) -> bool:
    """Samples a rank test can use: present and finite (a lost measurement is judged by the threshold rule)."""
    return figure is not None and all(math.isfinite(s) for s in figure.samples)


def _judge(change: Change, p_adjusted: float, alpha: float) -> Change:
    """Significant and beyond the threshold, in either direction; otherwise unchanged."""
    status = "unchanged"
    if p_adjusted < alpha:
        status, _ = classify(change.old, change.new, change.better, change.threshold, change.absolute)
    return replace(change, status=status, p_adjusted=p_adjusted)
