"""The runs directory (``Runs``): its runs found, read into the model, reserved and written.

- **Names** are the job's UTC start time, made unique within the root when
  the job starts (``Runs.reserve``: an atomic ``mkdir`` of a hidden marker,
  released once when the job ends, so two jobs starting in the same second
  get ``...Z`` and ``...Z-2`` and both are kept); they sort by time. A run
  is named by its folder.
- **Atomic**: a run's files are written into a hidden ``.tmp-*`` directory
  and renamed into place; an interrupted run leaves at most hidden
  leftovers, and earlier runs and ``latest`` are never half-written.
- **latest** is a one-line file naming the newest run (portable where
  symlinks are not), replaced atomically; a symlink a user made is followed
  when read, and a folder there is refused, never written over.
- **Reading**: a run is read into the current model (``reports.store.upgrade``,
  whatever schema wrote it); one that cannot be read is an error for a
  comparison (``RunError`` naming the run, its schema and the field), and
  data for a history (``Runs.read``: the runs, and each unreadable one with
  why), so nothing is lost and nothing stops.
- Runs follow the umask, like any file a user writes (the docs advise shared
  storage).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator

from cli import cannot_write
from datamodel import DecodeError

from .model import Results
from .upgrade import upgrade

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / "runs"
RESERVED = ".reserved-"


class StoreError(OSError):
    """A runs root that cannot take a run: not writable, or its ``latest`` is not a file."""


class RunError(ValueError):
    """A run that cannot be used: missing, unreadable, or not readable as the model (the field is named)."""


class SkippedRunWarning(UserWarning):
    """A run directory that was skipped because its results cannot be read."""


@dataclass(frozen=True)
class Unreadable:
    name: str
    why: str


@dataclass(frozen=True)
class Reading:
    """Every run of a root: those that read, oldest first, and those that do not, with why."""

    runs: tuple[Results, ...]
    unreadable: tuple[Unreadable, ...]


def run_name(now: datetime | None = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def load_results(run_dir: Path) -> Results:
    """A run's results.json, wherever its folder is, read into the current model and named by its folder."""
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
        results = upgrade(data, run_dir)
    except DecodeError as exc:
        raise RunError(f"run {run_dir.name} (schema {schema}) cannot be read: {exc}") from exc
    except ValueError as exc:
        raise RunError(f"run {run_dir.name}: {exc}") from exc
    if results.run.name != run_dir.name:
        results = replace(results, run=replace(results.run, name=run_dir.name))
    return results


class Runs:
    """The runs under one root folder."""

    def __init__(self, root: Path = DEFAULT_ROOT):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"Runs({str(self.root)!r})"

    def names(self) -> list[str]:
        """Finished runs in time order: hidden leftovers and the ``latest`` pointer are not runs."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir()
                      if p.is_dir() and not p.name.startswith(".") and p.name != "latest")

    def load(self, name: str) -> Results:
        return load_results(self.root / name)

    def latest(self) -> Path:
        """The run ``latest`` names (a file naming it, or a symlink to it)."""
        try:
            pointer = self._latest_pointer()
        except StoreError as exc:
            raise RunError(str(exc)) from exc
        if pointer.is_symlink():
            return pointer.resolve()
        if not pointer.exists():
            raise RunError(f"got no {pointer}, but should be a runs root written by `python -m reports`")
        return self.root / pointer.read_text().strip()

    def read(self) -> Reading:
        runs, unreadable = [], []
        for name in self.names():
            try:
                runs.append(self.load(name))
            except RunError as exc:
                unreadable.append(Unreadable(name, str(exc)))
        return Reading(tuple(runs), tuple(unreadable))

    def readable(self) -> tuple[Results, ...]:
        """Every run that can be read, oldest first; each one that cannot is skipped with a warning naming it."""
        reading = self.read()
        for skipped in reading.unreadable:
            warnings.warn(f"skipped run {skipped.name}: {skipped.why}", SkippedRunWarning, stacklevel=2)
        return reading.runs

    def newest(self, wanted: Callable[[Results], bool]) -> Results | None:
        """The newest run that reads and is ``wanted``, reading back from the newest (each that cannot be read is
        skipped with a warning naming it); None where none is."""
        for name in reversed(self.names()):
            try:
                results = self.load(name)
            except RunError as exc:
                warnings.warn(f"skipped run {name}: {exc}", SkippedRunWarning, stacklevel=2)
                continue
            if wanted(results):
                return results
        return None

    def check(self) -> None:
        """What writing a run here needs, checked before any work: a folder that can be made and written, and a
        ``latest`` that is a file or a symlink (or absent)."""
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"--out {self.root}: got a file, but should be a folder that holds the runs")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"--out {self.root}: cannot write there ({exc.strerror or exc}), but should be a "
                             "folder this user can write") from exc
        why = cannot_write(self.root)
        if why:
            raise StoreError(f"--out {self.root}: cannot write there ({why}), but should be a folder this user can "
                             "write")
        self._latest_pointer()

    @contextmanager
    def reserve(self, start: datetime | None = None) -> Iterator[str]:
        """A run name for a job starting now, unique within the root even for jobs started in the same second,
        held while the job runs and given back once when it ends."""
        self.root.mkdir(parents=True, exist_ok=True)
        base = run_name(start)
        for n in range(1, 10_000):
            name = base if n == 1 else f"{base}-{n}"
            if (self.root / name).exists():
                continue
            try:
                (self.root / f"{RESERVED}{name}").mkdir()
            except FileExistsError:
                continue
            break
        else:
            raise StoreError(f"{self.root}: got 10,000 runs named {base}, but a run name should be free")
        try:
            yield name
        finally:
            (self.root / f"{RESERVED}{name}").rmdir()  # a run written meanwhile does not need it either

    def write(self, name: str, files: dict[str, str | bytes]) -> Path:
        """Write ``files`` (relative name -> content) as the run ``name`` and point ``latest`` at it."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".tmp-{name}-{os.getpid()}"
        tmp.mkdir()
        try:
            for rel, content in files.items():
                path = tmp / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content if isinstance(content, bytes) else content.encode())
            final = self.root / name
            if final.exists():
                raise FileExistsError(f"run {final} already exists")
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._point_latest(name)
        return final

    def rewrite(self, name: str, files: dict[str, str | bytes]) -> Path:
        """Replace ``files`` of the written run ``name``, each at once (a reader sees the old file or the new),
        as when a search that ends after the run was written adds its answer to it."""
        folder = self.root / name
        if not (folder / "results.json").is_file():
            raise RunError(f"run {name}: got no {folder / 'results.json'}, but a run should be written before it "
                           "is rewritten")
        for rel, content in files.items():
            path = folder / rel
            tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
            try:
                tmp.write_bytes(content if isinstance(content, bytes) else content.encode())
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
        return folder

    def plots(self, results: Results) -> dict[str, bytes]:
        """The run's plots its results list, by relative path, that are in its folder: a path that would leave
        the folder, or a file missing, is left out."""
        found = {}
        for plot in results.plots:
            rel = PurePosixPath(plot)
            path = self.root / results.run.name / rel
            if not rel.is_absolute() and ".." not in rel.parts and path.is_file():
                found[rel.as_posix()] = path.read_bytes()
        return found

    def _point_latest(self, name: str) -> None:
        """``latest`` names ``name``; a user's symlink there is replaced by the file, a folder refused."""
        pointer = self._latest_pointer()
        tmp = self.root / f".latest-{os.getpid()}-{threading.get_ident()}"
        try:
            tmp.write_text(name + "\n")
            os.replace(tmp, pointer)
        finally:
            tmp.unlink(missing_ok=True)

    def _latest_pointer(self) -> Path:
        """``root/latest``, refused when it is a folder: it names the newest run, as a file or a symlink."""
        pointer = self.root / "latest"
        if pointer.is_dir() and not pointer.is_symlink():
            raise StoreError(f"{pointer}: got a folder, but should be a file naming the newest run (or a symlink "
                             "to it): remove or rename the folder")
        return pointer


def fallback_root() -> Path:
    """Where a run goes when the root asked for cannot take it: a folder of this user's in the temp dir."""
    return Path(tempfile.gettempdir()) / f"ddp-conformance-runs-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def dump_json(data) -> str:
    """JSON as the model orders it (a dict's order is part of what a report shows)."""
    return json.dumps(data, indent=2) + "\n"
