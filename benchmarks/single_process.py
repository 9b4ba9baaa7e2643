"""Benchmarks that need one process: shard caching and planning, timed by pytest-benchmark.

Each is a pytest-benchmark file run in a child process (so it measures a
fresh interpreter, like the nightly job); every round's time comes back as a
sample. In smoke mode the files run once with timing disabled, as a check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from .registry import Benchmark, Metric, Record, absolute, figure_of, figures_json
from .stats import Figure

ROOT = Path(__file__).resolve().parent.parent

RECORD = Record({
    "name": "pytest-benchmark test name",
    "time_ms": "figure: one round's time",
    "extra": "what the benchmark recorded about its input (extra_info)",
})


def run_pytest_benchmarks(path: str, smoke: bool) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        cmd = [sys.executable, "-m", "pytest", path, "-q", "-p", "no:cacheprovider", f"--benchmark-json={out}",
               *(["--benchmark-disable"] if smoke else [])]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"benchmarks {path} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}")
        if not out.exists():  # --benchmark-disable: each ran once, nothing was timed
            return []
        data = json.loads(out.read_text())
    return [{"name": b["name"], "extra": b.get("extra_info", {}),
             **figures_json(time_ms=Figure.of([t * 1e3 for t in b["stats"]["data"]], "ms", "lower"))}
            for b in data["benchmarks"]]


def _metrics(records: list[dict]) -> list[Metric]:
    return [absolute(f"time/{r['name']}", figure_of(r, "time_ms")) for r in records]


def pytest_benchmark(name: str, title: str, path: str) -> Benchmark:
    """A benchmark timed by a pytest-benchmark file, run in a child process."""
    return Benchmark(name=name, title=title, record=RECORD, metrics=_metrics, on_ranks=False,
                     run=lambda settings: run_pytest_benchmarks(path, settings.smoke))


SHARD_CACHE = pytest_benchmark("shard_cache", "Shard caching: cached views against re-slicing every bucket",
                               "benchmarks/test_shard_cache.py")
PLANNING = pytest_benchmark("planning", "Planner speed (no tensor storage allocated)", "benchmarks/test_planning.py")
