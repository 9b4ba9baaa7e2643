"""Compare a report run with an earlier one: the nightly gate.

Only the flat ``metrics`` of ``results.json`` (reports/schema.md) are compared.
Each metric says itself whether bigger is better (``better``), so nothing is
guessed from its name. A move in the bad direction by more than the threshold
(relative to the old value) is a regression; conformance counts use a zero
threshold, so one more failed test is a regression.

``python -m reports.compare`` compares ``latest`` with the run before it;
``python -m reports.compare OLD NEW`` compares two runs (names under
``--root`` or directories).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from tabulate import tabulate

from .writer import DEFAULT_ROOT, latest_run

SCHEMA = 1
BETTER = ("higher", "lower")
DEFAULT_THRESHOLD = 0.10
# Conformance counts are exact: any increase in failures is a regression.
DEFAULT_PREFIX_THRESHOLDS: dict[str, float] = {"conformance/": 0.0}
STATUS_ORDER = ("regression", "improvement", "unchanged", "added", "removed")


class RunError(ValueError):
    """A run that cannot be compared: missing, unreadable or of an unknown schema."""


@dataclass(frozen=True)
class Change:
    """One metric across two runs; ``relative`` is None when it has no meaning (old is 0 or absent)."""

    key: str
    old: float | None
    new: float | None
    unit: str
    better: str
    relative: float | None
    status: str
    threshold: float


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


def _value(key: str, entry, run: str) -> float:
    value = entry.get("value") if isinstance(entry, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"got value {value!r} for metric {key!r} in the {run} run, but should be a number")
    return float(value)


def _better(key: str, entry, run: str) -> str:
    better = entry.get("better") if isinstance(entry, dict) else None
    if better not in BETTER:
        raise ValueError(f"got better={better!r} for metric {key!r} in the {run} run, "
                         f"but should be one of {BETTER}")
    return better


def _same(key: str, field: str, old: dict, new: dict) -> str:
    """A metric whose meaning changed between runs cannot be compared."""
    a, b = old.get(field, ""), new.get(field, "")
    if a != b:
        raise ValueError(f"got {field}={b!r} for metric {key!r} in the new run and {a!r} in the old one, "
                         f"but should be the same in both runs")
    return b


def classify(old: float, new: float, better: str, threshold: float) -> tuple[str, float | None]:
    """Status and relative change of one metric; from 0 any bad move regresses (e.g. 0 -> 1 failures)."""
    if not (math.isfinite(old) and math.isfinite(new)):
        return _classify_non_finite(old, new), None
    sign = 1.0 if better == "higher" else -1.0
    if old == 0:
        gain = sign * new
        status = "regression" if gain < 0 else "improvement" if gain > 0 else "unchanged"
        return status, None
    relative = (new - old) / abs(old)
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


def compare_metrics(old: Mapping[str, dict], new: Mapping[str, dict], threshold: float = DEFAULT_THRESHOLD,
                    thresholds: Mapping[str, float] | None = None) -> list[Change]:
    """Every metric of either run, sorted by key.

    ``thresholds`` maps key prefixes to their own threshold, on top of DEFAULT_PREFIX_THRESHOLDS.
    """
    if threshold < 0:
        raise ValueError(f"got threshold {threshold}, but should be >= 0")
    prefixes = merged_thresholds(thresholds)
    changes = []
    for key in sorted(set(old) | set(new)):
        limit = threshold_for(key, threshold, prefixes)
        if key not in new:
            changes.append(_one_sided(key, old[key], "old", "removed", limit))
        elif key not in old:
            changes.append(_one_sided(key, new[key], "new", "added", limit))
        else:
            changes.append(_compare_one(key, old[key], new[key], limit))
    return changes


def _one_sided(key: str, entry: dict, run: str, status: str, limit: float) -> Change:
    value = _value(key, entry, run)
    old, new = (value, None) if status == "removed" else (None, value)
    return Change(key, old, new, entry.get("unit", ""), _better(key, entry, run), None, status, limit)


def _compare_one(key: str, old_entry: dict, new_entry: dict, limit: float) -> Change:
    old, new = _value(key, old_entry, "old"), _value(key, new_entry, "new")
    _better(key, old_entry, "old")
    better = _better(key, new_entry, "new")
    _same(key, "better", old_entry, new_entry)
    unit = _same(key, "unit", old_entry, new_entry)
    status, relative = classify(old, new, better, limit)
    return Change(key, old, new, unit, better, relative, status, limit)


def load_results(run_dir: Path) -> dict:
    """results.json of a run, checked to be a schema this module understands."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunError(f"got no run directory at {run_dir}, "
                       f"but should be a run directory holding results.json")
    path = run_dir / "results.json"
    if not path.is_file():
        raise RunError(f"got no {path}, but should be a results.json written by `python -m reports`")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RunError(f"got unreadable {path} ({exc}), but should be JSON") from exc
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SCHEMA:
        raise RunError(f"got schema {schema!r} in {path}, but should be {SCHEMA} (reports/schema.md)")
    if not isinstance(data.get("metrics"), dict):
        raise RunError(f"got metrics of type {type(data.get('metrics')).__name__} in {path}, "
                       f"but should be an object of key -> {{value, unit, better}}")
    return data


def compare_runs(old_dir: Path, new_dir: Path, threshold: float = DEFAULT_THRESHOLD,
                 thresholds: Mapping[str, float] | None = None) -> list[Change]:
    """Compare the metrics of two run directories."""
    old, new = load_results(Path(old_dir)), load_results(Path(new_dir))
    return compare_metrics(old["metrics"], new["metrics"], threshold, thresholds)


def run_names(root: Path) -> list[str]:
    """Finished runs in time order: hidden ``.tmp-*`` leftovers and the ``latest`` pointer are not runs."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.name != "latest")


def previous_run(root: Path, current_name: str) -> Path | None:
    """The run just before ``current_name`` (names are UTC timestamps, so they sort by time)."""
    earlier = [name for name in run_names(root) if name < current_name]
    return Path(root) / earlier[-1] if earlier else None


def _pct(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def _fmt_value(value: float | None) -> str:
    if value is None:
        return ""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:,.1f}" if abs(value) >= 1000 else f"{value:.4g}"


def _fmt_relative(change: Change) -> str:
    if change.relative is not None:
        return f"{change.relative:+.1%}"
    return "from 0" if change.old == 0 else "n/a"


def _severity(change: Change) -> tuple[float, str]:
    """Largest moves first; moves from 0 have no relative size and go on top."""
    size = math.inf if change.relative is None else abs(change.relative)
    return (-size, change.key)


def _rows(changes: Sequence[Change]) -> list[dict]:
    return [{"status": c.status, "metric": c.key, "old": _fmt_value(c.old), "new": _fmt_value(c.new),
             "change": _fmt_relative(c), "unit": c.unit, "better": c.better, "threshold": _pct(c.threshold)}
            for c in changes]


def summary_line(changes: Sequence[Change], threshold: float = DEFAULT_THRESHOLD,
                 thresholds: Mapping[str, float] | None = None) -> str:
    counts = {s: sum(c.status == s for c in changes) for s in STATUS_ORDER}
    prefixes = merged_thresholds(thresholds)
    extra = "".join(f"; {p}: {_pct(t)}" for p, t in sorted(prefixes.items()))
    line = (f"{counts['regression']} regressions, {counts['improvement']} improvements, "
            f"{counts['unchanged']} unchanged (threshold {_pct(threshold)}{extra})")
    if counts["added"] or counts["removed"]:
        line += f"; {counts['added']} added, {counts['removed']} removed"
    return line


def comparison_markdown(changes: Sequence[Change], threshold: float = DEFAULT_THRESHOLD,
                        thresholds: Mapping[str, float] | None = None,
                        listed: Sequence[str] = ("regression", "improvement", "added", "removed")) -> str:
    """Regressions first (largest first), then improvements, then added and removed metrics.

    ``listed`` picks the statuses that get table rows; the summary line counts them all.
    """
    shown = []
    for status in listed:
        group = [c for c in changes if c.status == status]
        shown += sorted(group, key=_severity) if status in ("regression", "improvement") else group
    text = summary_line(changes, threshold, thresholds)
    if shown:
        text += "\n\n" + tabulate(_rows(shown), headers="keys", tablefmt="github", disable_numparse=True)
    return text + "\n"


def _resolve(arg: str, root: Path) -> Path:
    """A run is named either by its directory or by its name under ``root``."""
    path = Path(arg)
    return path if path.is_dir() else root / arg


def _latest(root: Path) -> Path:
    latest = latest_run(root)
    if latest is None:
        raise RunError(f"got no {root / 'latest'}, but should be a runs root written by `python -m reports`")
    return latest


def pick_runs(old: str | None, new: str | None, root: Path) -> tuple[Path, Path]:
    """No argument: latest and the run before it; one: that run against latest; two: those runs."""
    new_dir = _resolve(new, root) if new else _latest(root)
    if old:
        return _resolve(old, root), new_dir
    before = previous_run(new_dir.parent, new_dir.name)
    if before is None:
        raise RunError(f"got no run before {new_dir.name} in {new_dir.parent}, "
                       f"but should be at least two runs to compare")
    return before, new_dir


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
    parser.add_argument("--prefix-threshold", type=_prefix_threshold, action="append", default=[],
                        metavar="PREFIX=FRACTION",
                        help="repeatable; longest matching prefix wins (always added: conformance/=0)")
    parser.add_argument("--fail-on-regression", action="store_true", help="exit 1 when anything regressed")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when fine, 1 on a regression with --fail-on-regression, 2 when runs cannot be compared."""
    args = parse_args(argv)
    thresholds = dict(args.prefix_threshold)
    try:
        old_dir, new_dir = pick_runs(args.old, args.new, args.root)
        changes = compare_runs(old_dir, new_dir, args.threshold, thresholds)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"Comparing {new_dir.name} with {old_dir.name}\n")
    print(comparison_markdown(changes, args.threshold, thresholds), end="")
    regressed = any(c.status == "regression" for c in changes)
    return 1 if args.fail_on_regression and regressed else 0


if __name__ == "__main__":
    raise SystemExit(main())
