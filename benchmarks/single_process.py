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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from datamodel import doc

from .registry import Benchmark, Metric, absolute
from .stats import Figure

ROOT = Path(__file__).resolve().parent.parent

@dataclass(frozen=True)
class PytestBenchmarkRecord:
    """One pytest-benchmark test: every round's time."""

    name: str = doc("pytest-benchmark test name")
    time_ms: Figure = doc("one round's time")
    extra: dict[str, Any] = doc("what the benchmark recorded about its input (extra_info)")


def run_pytest_benchmarks(path: str, smoke: bool) -> list[PytestBenchmarkRecord]:
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
    return [PytestBenchmarkRecord(b["name"], Figure.of([t * 1e3 for t in b["stats"]["data"]], "ms", "lower"),
                                  b.get("extra_info", {}))
            for b in data["benchmarks"]]


def _metrics(records: Sequence[PytestBenchmarkRecord]) -> dict[str, Metric]:
    return {f"time/{r.name}": absolute(r.time_ms) for r in records}


FILES = {"shard_cache": "benchmarks/test_shard_cache.py", "planning": "benchmarks/test_planning.py"}


def pytest_benchmark(name: str, title: str) -> Benchmark:
    """A benchmark timed by a pytest-benchmark file (``FILES``), run in a child process."""
    return Benchmark(name=name, title=title, record=PytestBenchmarkRecord, metrics=_metrics, on_ranks=False,
                     runner=f"benchmarks.single_process:measure_{name}")


def measure_shard_cache(settings) -> list[PytestBenchmarkRecord]:
    return run_pytest_benchmarks(FILES["shard_cache"], settings.smoke)


def measure_planning(settings) -> list[PytestBenchmarkRecord]:
    return run_pytest_benchmarks(FILES["planning"], settings.smoke)


SHARD_CACHE = pytest_benchmark("shard_cache", "Shard caching: cached views against re-slicing every bucket")
PLANNING = pytest_benchmark("planning", "Planner speed (no tensor storage allocated)")
