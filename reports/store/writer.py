"""Run directories: a name reserved when the job starts, the run written aside, then renamed into place.

- **Names** are the job's UTC start time, made unique within the root when
  the job starts (``reserve``: an atomic ``mkdir`` of a hidden marker, so two
  jobs starting in the same second get ``...Z`` and ``...Z-2`` and both are
  kept); they sort by time.
- **Atomic**: files are written into a hidden ``.tmp-*`` directory and
  renamed into place; an interrupted run leaves at most hidden leftovers,
  and earlier runs and ``latest`` are never half-written.
- **latest** is a one-line file naming the newest run (portable where
  symlinks are not), replaced atomically; a symlink a user made is followed
  when read, and a folder there is refused, never written over.
- Runs follow the umask, like any file a user writes (the docs advise shared
  storage).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / "runs"
RESERVED = ".reserved-"


class StoreError(OSError):
    """A runs root that cannot take a run: not writable, or its ``latest`` is not a file."""


def run_name(now: datetime | None = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def check_root(root: Path) -> None:
    """What writing a run into ``root`` needs, checked before any work: a folder that can be made and written,
    and a ``latest`` that is a file or a symlink (or absent)."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise StoreError(f"--out {root}: got a file, but should be a folder that holds the runs")
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = Path(tempfile.mkdtemp(prefix=".probe-", dir=root))
        probe.rmdir()
    except OSError as exc:
        raise StoreError(f"--out {root}: cannot write there ({exc.strerror or exc}), but should be a folder this "
                         "user can write") from exc
    _latest_pointer(root)


def reserve(root: Path, start: datetime | None = None) -> str:
    """A run name for a job starting now, unique within ``root`` even for jobs started in the same second."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    base = run_name(start)
    for n in range(1, 10_000):
        name = base if n == 1 else f"{base}-{n}"
        if (root / name).exists():
            continue
        try:
            (root / f"{RESERVED}{name}").mkdir()
        except FileExistsError:
            continue
        return name
    raise StoreError(f"{root}: got 10,000 runs named {base}, but a run name should be free")


def write_run(files: dict[str, str | bytes], root: Path = DEFAULT_ROOT, name: str | None = None) -> Path:
    """Write ``files`` (relative name -> content) as the run ``name`` (reserved, or reserved now) and point
    ``latest`` at it."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    name = name or reserve(root)
    tmp = root / f".tmp-{name}-{os.getpid()}"
    tmp.mkdir()
    try:
        for rel, content in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
        final = root / name
        if final.exists():
            raise FileExistsError(f"run {final} already exists")
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        release(root, name)
    point_latest(root, name)
    return final


def release(root: Path, name: str) -> None:
    """Give a reserved name back (a job that ends before writing its run)."""
    try:
        (root / f"{RESERVED}{name}").rmdir()
    except OSError:
        pass


def point_latest(root: Path, name: str) -> None:
    """``latest`` names ``name``; a user's symlink there is replaced by the file, a folder refused."""
    pointer = _latest_pointer(root)
    tmp = Path(root) / f".latest-{os.getpid()}"
    try:
        tmp.write_text(name + "\n")
        os.replace(tmp, pointer)
    finally:
        tmp.unlink(missing_ok=True)


def latest_run(root: Path = DEFAULT_ROOT) -> Path | None:
    """The run ``latest`` names (a file naming it, or a symlink to it); None when there is none."""
    pointer = _latest_pointer(root)
    if pointer.is_symlink():
        return pointer.resolve()
    if not pointer.exists():
        return None
    return Path(root) / pointer.read_text().strip()


def _latest_pointer(root: Path) -> Path:
    """``root/latest``, refused when it is a folder: it names the newest run, as a file or a symlink."""
    pointer = Path(root) / "latest"
    if pointer.is_dir() and not pointer.is_symlink():
        raise StoreError(f"{pointer}: got a folder, but should be a file naming the newest run (or a symlink to "
                         "it): remove or rename the folder")
    return pointer


def fallback_root() -> Path:
    """Where a run goes when the root asked for cannot take it: a folder of this user's in the temp dir."""
    return Path(tempfile.gettempdir()) / f"ddp-conformance-runs-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def dump_json(data) -> str:
    """JSON as the model orders it (a dict's order is part of what a report shows)."""
    return json.dumps(data, indent=2) + "\n"
