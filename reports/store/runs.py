"""The runs directory: finding runs, reading their results.json, and skipping the ones that are broken.

A run is a directory named by its UTC start time (so names sort by time)
holding ``results.json``; ``latest`` names the newest and ``.tmp-*`` are runs
still being written (or abandoned). A run whose results cannot be read is an
error for a comparison (``load_results`` raises ``RunError``) and a warning
for a trend (``readable_runs`` skips it, naming it), so nothing is lost and
nothing stops.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from .writer import DEFAULT_ROOT, latest_run

# 1: one value per metric; 2: samples, medians, intervals and the gate; 3: the run's setup, every node's hardware
SCHEMAS = (1, 2, 3, 4)


class RunError(ValueError):
    """A run that cannot be used: missing, unreadable or of an unknown schema."""


class SkippedRunWarning(UserWarning):
    """A run directory that was skipped because its results cannot be read."""


def load_results(run_dir: Path) -> dict:
    """results.json of a run, checked to be a schema this project understands."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunError(f"got no run directory at {run_dir}, but should be a run directory holding results.json")
    path = run_dir / "results.json"
    if not path.is_file():
        raise RunError(f"got no {path}, but should be a results.json written by `python -m reports`")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RunError(f"got unreadable {path} ({exc}), but should be JSON") from exc
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema not in SCHEMAS:
        raise RunError(f"got schema {schema!r} in {path}, but should be one of {SCHEMAS} (reports/schema.md)")
    if not isinstance(data.get("metrics"), dict):
        raise RunError(f"got metrics of type {type(data.get('metrics')).__name__} in {path}, "
                       f"but should be an object of key -> metric")
    return data


def run_names(root: Path) -> list[str]:
    """Finished runs in time order: hidden ``.tmp-*`` leftovers and the ``latest`` pointer are not runs."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "latest")


def latest(root: Path = DEFAULT_ROOT) -> Path:
    run = latest_run(root)
    if run is None:
        raise RunError(f"got no {Path(root) / 'latest'}, but should be a runs root written by `python -m reports`")
    return run


def readable_runs(root: Path = DEFAULT_ROOT) -> list[tuple[str, dict]]:
    """Every run that can be read, oldest first; each one that cannot is skipped with a warning naming it."""
    runs = []
    for name in run_names(root):
        try:
            runs.append((name, load_results(Path(root) / name)))
        except RunError as exc:
            warnings.warn(f"skipped run {name}: {exc}", SkippedRunWarning, stacklevel=2)
    return runs
