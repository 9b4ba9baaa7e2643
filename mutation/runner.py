"""Running checks against the scratch tree, unmutated or with one mutant applied by cosmic-ray.

The run works in a scratch copy of the files git tracks or would track:
cosmic-ray rewrites a module in place, and the multigpu suite's ranks import
from disk. The checks run in their own process group, ended whole when they
finish, time out or the run is interrupted, so no rank outlives its mutant.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from . import ROOT
from .checks import command
from .population import Mutant


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def copy_tree(dest: Path) -> None:
    """The files git tracks or would track (not ignored), as they are on disk now."""
    for name in filter(None, git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def run_checks(cmd: Sequence[str], tree: Path, timeout: float | None) -> tuple[bool, str]:
    """(passed, output). No bytecode is written: a mutant and its module can share a size and an mtime second."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True) as proc:
        try:
            output = proc.communicate(timeout=timeout)[0]
            return proc.returncode == 0, output
        except subprocess.TimeoutExpired:
            return False, f"timeout: still running after {timeout:.0f} s"
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)


def first_failure(output: str) -> str:
    """The first failed test of pytest's summary, or the output's last line (a timeout, a collection error)."""
    lines = [line for line in output.splitlines() if line.strip()]
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return (failed[0] if failed else lines[-1] if lines else "")[:300]


def run_mutant(tree: Path, key: str, timeout: float) -> dict:
    """Apply one mutant to ``tree``, run its module's checks, put the module back; the result to record."""
    from cosmic_ray.mutating import use_mutation
    from cosmic_ray.plugins import get_operator

    mutant = Mutant.from_key(key)
    started = time.monotonic()
    with use_mutation(tree / mutant.module, get_operator(mutant.operator)(), mutant.occurrence) as (before, after):
        if after is None:
            raise RuntimeError(f"{key}: got no place for occurrence {mutant.occurrence} of {mutant.operator}, "
                               "but the session found one there: the module differs from the session's")
        passed, output = run_checks(command([mutant.module], tree), tree, timeout)
    diff = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                f"a/{mutant.module}", f"b/{mutant.module}")
    return {"mutant": key, "outcome": "survived" if passed else "killed", "seconds": time.monotonic() - started,
            "killed_by": None if passed else first_failure(output), "diff": "".join(diff)}
