"""The runs directory: finding runs, reading each into the model, and skipping the ones that cannot be read.

A run is a directory named by its UTC start time (so names sort by time)
holding ``results.json``; ``latest`` names the newest, and hidden entries
(``.tmp-*``, ``.reserved-*``) are runs still being written, or abandoned. A
run is read into the current model (``reports.store.upgrade``, whatever
schema wrote it); one that cannot be read is an error for a comparison
(``load_results`` raises ``RunError`` naming the run, its schema and the
field) and a warning for a trend (``readable_runs`` skips it, naming it), so
nothing is lost and nothing stops.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from datamodel import DecodeError

from .model import Results
from .upgrade import upgrade
from .writer import DEFAULT_ROOT, StoreError, latest_run


class RunError(ValueError):
    """A run that cannot be used: missing, unreadable, or not readable as the model (the field is named)."""


class SkippedRunWarning(UserWarning):
    """A run directory that was skipped because its results cannot be read."""


def load_results(run_dir: Path) -> Results:
    """A run's results.json read into the current model."""
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
    try:
        return upgrade(data)
    except DecodeError as exc:
        raise RunError(f"run {run_dir.name} (schema {schema}) cannot be read: {exc}") from exc
    except ValueError as exc:
        raise RunError(f"run {run_dir.name}: {exc}") from exc


def run_names(root: Path) -> list[str]:
    """Finished runs in time order: hidden leftovers and the ``latest`` pointer are not runs."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "latest")


def latest(root: Path = DEFAULT_ROOT) -> Path:
    try:
        run = latest_run(root)
    except StoreError as exc:
        raise RunError(str(exc)) from exc
    if run is None:
        raise RunError(f"got no {Path(root) / 'latest'}, but should be a runs root written by `python -m reports`")
    return run


def readable_runs(root: Path = DEFAULT_ROOT) -> list[tuple[str, Results]]:
    """Every run that can be read, oldest first; each one that cannot is skipped with a warning naming it."""
    runs = []
    for name in run_names(root):
        try:
            runs.append((name, load_results(Path(root) / name)))
        except RunError as exc:
            warnings.warn(f"skipped run {name}: {exc}", SkippedRunWarning, stacklevel=2)
    return runs
