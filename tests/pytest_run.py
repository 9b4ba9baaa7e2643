"""Run pytest from the repository root for tests of the plugin itself: in a child process, or in this one."""

import os
import subprocess
import sys
from pathlib import Path

from reports.conformance.suites import pytest_in_process

ROOT = Path(__file__).resolve().parent.parent


def run_pytest(*args: str, env: dict | None = None, in_process: bool = False) -> subprocess.CompletedProcess:
    """``in_process``: a session of this interpreter, sharing its warm ranks (only for what reads no
    environment at import and needs no process of its own)."""
    argv = ["-p", "no:cacheprovider", "-rs", *args]
    environ = {**os.environ, **(env or {})}
    if in_process:
        code, out, err = pytest_in_process(argv, environ)
        return subprocess.CompletedProcess(["pytest", *argv], code, out, err)
    return subprocess.run([sys.executable, "-m", "pytest", *argv], cwd=ROOT, capture_output=True, text=True,
                          env=environ, timeout=300)
