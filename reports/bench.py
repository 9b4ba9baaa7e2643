"""Run a pytest-benchmark file in a child process and return its figures as rows."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from .conformance import ROOT


def run_benchmarks(path: str, extra_args: list[str] | None = None) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        cmd = [sys.executable, "-m", "pytest", path, "-q", "-p", "no:cacheprovider",
               f"--benchmark-json={out}", *(extra_args or [])]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"benchmarks {path} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}")
        if not out.exists():  # --benchmark-disable: each ran once, nothing was timed
            return []
        data = json.loads(out.read_text())
    return [
        {
            "name": b["name"],
            "min_ms": b["stats"]["min"] * 1e3,
            "median_ms": b["stats"]["median"] * 1e3,
            "max_ms": b["stats"]["max"] * 1e3,
            "rounds": b["stats"]["rounds"],
            **b.get("extra_info", {}),
        }
        for b in data["benchmarks"]
    ]
