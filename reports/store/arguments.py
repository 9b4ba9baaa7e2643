"""The argument types of the report's commands that read runs (``cli.Arg``): a run folder, a runs root."""

from __future__ import annotations

from pathlib import Path

from cli import Arg

from .model import Results
from .runs import RunError, Runs, load_results


class RunFolder(Arg):
    """A run's folder: ``results.json`` this project wrote, of a schema it reads."""

    kind = "run"

    def __call__(self, text: str) -> Path:
        path = Path(text)
        try:
            load_results(path)
        except RunError as exc:
            self.refuse(text, f"a run folder holding a results.json this project wrote ({exc})")
        return path


class RunsRoot(Arg):
    """A folder holding runs (``python -m reports --out``): it must exist; it may hold none yet."""

    kind = "runs root"

    def __call__(self, text: str) -> Runs:
        path = Path(text)
        if not path.is_dir():
            self.refuse(text, "a folder holding runs, that exists" + (" (it is a file)" if path.is_file() else
                                                                      " (python -m reports --out writes one)"))
        return Runs(path)


class RunOrLatest(Arg):
    """A run folder, or a runs root (its latest run), or its ``latest`` pointer: the run, read."""

    kind = "run"

    def __call__(self, text: str) -> Results:
        path = Path(text)
        try:
            if path.name == "latest" and path.is_file():
                path = Runs(path.parent).latest()
            elif path.is_dir() and not (path / "results.json").exists() and (path / "latest").exists():
                path = Runs(path).latest()
            return load_results(path)
        except RunError as exc:
            self.refuse(text, f"a run folder written by `python -m reports` (reports/runs/<name>), or a runs root "
                              f"({exc})")
