"""Run pytest in a child process from the repository root (for tests of the plugin itself)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_pytest(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *args],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300,
    )
