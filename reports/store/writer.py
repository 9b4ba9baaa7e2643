"""Atomic report directories: a run is written aside, then renamed into place.

An interrupted run leaves at most a hidden ``.tmp-*`` directory; earlier runs
and the ``latest`` pointer are never half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / "runs"


def run_name(now: datetime | None = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def write_run(files: dict[str, str | bytes], root: Path = DEFAULT_ROOT, name: str | None = None) -> Path:
    """Write ``files`` (relative name -> content) as one run directory and point ``latest`` at it."""
    root.mkdir(parents=True, exist_ok=True)
    name = name or run_name()
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    try:
        for rel, content in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
        final = root / name
        if final.exists():
            raise FileExistsError(f"report run {final} already exists")
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _point_latest(root, name)
    return final


def _point_latest(root: Path, name: str) -> None:
    """``latest`` is a one-line file (portable where symlinks are not) replaced atomically."""
    fd, tmp = tempfile.mkstemp(prefix=".latest-", dir=root)
    with os.fdopen(fd, "w") as fh:
        fh.write(name + "\n")
    os.replace(tmp, root / "latest")


def latest_run(root: Path = DEFAULT_ROOT) -> Path | None:
    pointer = root / "latest"
    if not pointer.exists():
        return None
    return root / pointer.read_text().strip()


def dump_json(data) -> str:
    return json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
