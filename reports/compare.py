"""Compare a report run with an earlier one: the nightly gate, which must not cry wolf.

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
  "absolute"``.
- Exact metrics (test counts, caught bugs, wrong elements): any move in the
  bad direction is a regression.
- A metric without samples on one side (a run written before schema 2):
  the old rule, a move beyond the threshold, with a note saying so.

``python -m reports.compare`` compares ``latest`` with the newest earlier run
of the same setup (``reports.comparable``: backend, world size, launch mode,
nodes, devices); ``python -m reports.compare OLD NEW`` compares two runs
(names under ``--root`` or directories), and gates nothing when their setups
differ. With ``--fail-on-regression`` the exit code is 1
when a gated metric regressed; informative regressions are reported only.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

from scipy import stats
from benchmarks.stats import BETTER, Figure, describe

from .render import table
from .comparable import why_not_comparable
from .runs import RunError, latest, load_results, previous_comparable
from .writer import DEFAULT_ROOT

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
                 bool(entry.get("exact", False)), figure, threshold)


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
        limit = _limit(key, new.get(key) or old[key], threshold, prefixes)
        if key not in new or key not in old:
            status, side, entry = ("removed", "old", old[key]) if key not in new else ("added", "new", new[key])
            e = read_entry(key, entry, side)
            values = (e.value, None) if status == "removed" else (None, e.value)
            changes[key] = Change(key, *values, e.unit, e.better, None, status, limit, e.gated, "-")
            continue
        a, b = read_entry(key, old[key], "old"), read_entry(key, new[key], "new")
        for field in ("better", "unit"):
            _same(key, field, a, b)
        if any(key.startswith(prefix) for prefix in gate):
            b = replace(b, gated=True)
        changes[key] = _compare_one(key, a, b, limit, absolute_threshold)
        if changes[key].test == "mann-whitney":
            tested[changes[key].family].append((key, changes[key].p_value))
    for family, pairs in tested.items():
        if not pairs:
            continue
        adjusted = stats.false_discovery_control([p for _, p in pairs])
        for (key, _), p_adj in zip(pairs, adjusted):
            changes[key] = _judge(changes[key], float(p_adj), alpha)
    return [changes[k] for k in sorted(changes)]


def _limit(key: str, entry, default: float, prefixes: Mapping[str, float]) -> float:
    """A prefix the caller gave wins; then the metric's own practical threshold; then the default."""
    own = entry.get("threshold") if isinstance(entry, dict) else None
    return threshold_for(key, default if own is None else float(own), prefixes)


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


# ---------------------------------------------------------------- markdown


def _pct(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def _fmt_value(value: float | None, figure: Figure | None) -> str:
    if figure is not None:
        return describe(figure)
    if value is None:
        return ""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:,.1f}" if abs(value) >= 1000 else f"{value:.4g}"


def _fmt_change(change: Change) -> str:
    if change.absolute and change.old is not None and change.new is not None:
        return f"{change.new - change.old:+.3g}"
    if change.relative is not None:
        return f"{change.relative:+.1%}"
    return "from 0" if change.old == 0 else "n/a"


def _fmt_threshold(change: Change) -> str:
    return f"{change.threshold:g}" if change.absolute else _pct(change.threshold)


def _fmt_p(change: Change) -> str:
    if change.p_adjusted is None:
        return change.test
    return f"{change.p_adjusted:.2g}"


def _severity(change: Change) -> tuple[float, str]:
    """Largest moves first; moves from 0 have no relative size and go on top."""
    size = math.inf if change.relative is None else abs(change.relative)
    return (-size, change.key)


def _rows(changes: Sequence[Change]) -> list[dict]:
    return [{"status": c.status, "metric": c.key, "old": _fmt_value(c.old, c.old_figure),
             "new": _fmt_value(c.new, c.new_figure), "change": _fmt_change(c), "unit": c.unit, "better": c.better,
             "p (BH)": _fmt_p(c), "threshold": _fmt_threshold(c)}
            for c in changes]


def counts(changes: Sequence[Change]) -> str:
    n = {s: sum(c.status == s for c in changes) for s in STATUS_ORDER}
    line = f"{n['regression']} regressions, {n['improvement']} improvements, {n['unchanged']} unchanged"
    if n["added"] or n["removed"]:
        line += f"; {n['added']} added, {n['removed']} removed"
    return line


def summary_line(changes: Sequence[Change], threshold: float = DEFAULT_THRESHOLD, alpha: float = ALPHA) -> str:
    gated = [c for c in changes if c.gated]
    informative = [c for c in changes if not c.gated]
    return (f"Gated: {counts(gated)}. Informative: {counts(informative)}. A change counts when "
            f"Mann-Whitney's U is significant after Benjamini-Hochberg (FDR {_pct(alpha)} per family) and "
            f"the move exceeds {_pct(threshold)} ({DEFAULT_ABSOLUTE_THRESHOLD:g} absolute for efficiencies); "
            "counts are exact.")


def comparison_markdown(changes: Sequence[Change], threshold: float = DEFAULT_THRESHOLD, alpha: float = ALPHA,
                        listed: Sequence[str] = ("regression", "improvement", "added", "removed")) -> str:
    """The summary, every gated metric, then the informative ones whose status is in ``listed``."""
    text = summary_line(changes, threshold, alpha)
    unsampled = [c for c in changes if c.test == "threshold"]
    if unsampled:
        text += (f"\n\nNote: {len(unsampled)} metrics have no samples in one of the runs (written before "
                 f"schema 2): they are compared by the threshold alone, as then.")
    gated = sorted((c for c in changes if c.gated), key=lambda c: (STATUS_ORDER.index(c.status), c.key))
    if gated:
        text += "\n\nGated metrics (a regression here fails the job):\n\n" + _table(gated)
    shown = []
    for status in listed:
        group = [c for c in changes if not c.gated and c.status == status]
        shown += sorted(group, key=_severity) if status in ("regression", "improvement") else group
    if shown:
        text += "\n\nInformative metrics that moved (reported, never failing the job):\n\n" + _table(shown)
    return text + "\n"


def _table(changes: Sequence[Change]) -> str:
    return table(_rows(changes), numparse=False)


# ---------------------------------------------------------------- CLI


def _resolve(arg: str, root: Path) -> Path:
    """A run is named either by its directory or by its name under ``root``."""
    path = Path(arg)
    return path if path.is_dir() else root / arg


def pick_runs(old: str | None, new: str | None, root: Path) -> tuple[Path, Path, list[str]]:
    """No argument: latest and the newest earlier run of its setup; one: that run against latest; two: those
    runs. Also a line for each run passed over because its setup differs or it cannot be read."""
    new_dir = _resolve(new, root) if new else latest(root)
    if old:
        return _resolve(old, root), new_dir, []
    before, passed = previous_comparable(new_dir.parent, new_dir.name, load_results(new_dir))
    if before is None:
        raise RunError(f"got no earlier run of the same setup as {new_dir.name} in {new_dir.parent}, but should "
                       f"be at least two runs to compare" + "".join(f"\n  passed over {p}" for p in passed))
    return before, new_dir, passed


def _prefix_threshold(text: str) -> tuple[str, float]:
    prefix, sep, value = text.rpartition("=")
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not sep or not prefix or number < 0:
        raise argparse.ArgumentTypeError(f"got {text!r}, but should be PREFIX=FRACTION, e.g. busbw=0.15")
    return prefix, number


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m reports.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", nargs="?", help="earlier run: name under --root or a directory")
    parser.add_argument("new", nargs="?", help="later run (default: latest)")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="directory holding the runs")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help="relative change that counts (default 0.1 = 10%%)")
    parser.add_argument("--alpha", type=float, default=ALPHA,
                        help="false discovery rate of the significance test (default 0.05)")
    parser.add_argument("--prefix-threshold", type=_prefix_threshold, action="append", default=[],
                        metavar="PREFIX=FRACTION",
                        help="repeatable; longest matching prefix wins (always added: conformance/=0)")
    parser.add_argument("--gate", action="append", default=[], metavar="PREFIX",
                        help="repeatable: gate the informative metrics whose key starts with PREFIX too, e.g. "
                             "busbw_largest/ on a dedicated GPU node")
    parser.add_argument("--fail-on-regression", action="store_true", help="exit 1 when a gated metric regressed")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when fine (or the runs are not comparable: nothing is gated), 1 on a gated regression with
    --fail-on-regression, 2 when runs cannot be read."""
    args = parse_args(argv)
    thresholds = dict(args.prefix_threshold)
    try:
        old_dir, new_dir, passed = pick_runs(args.old, args.new, args.root)
        old, new = load_results(old_dir), load_results(new_dir)
        why = why_not_comparable(old, new)
        changes = [] if why else compare_metrics(old["metrics"], new["metrics"], args.threshold, thresholds,
                                                  args.alpha, gate=args.gate)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in passed:
        print(f"Passed over {line}")
    if why:
        print(f"{new_dir.name} is not comparable with {old_dir.name}: {why}. Nothing is gated.")
        return 0
    print(f"Comparing {new_dir.name} with {old_dir.name}\n")
    print(comparison_markdown(changes, args.threshold, args.alpha), end="")
    return 1 if args.fail_on_regression and gated_regressions(changes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
