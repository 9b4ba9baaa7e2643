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

from .registry import Benchmark, Metric, Record, cell, figure_of, figures_json
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
    return [Metric(f"time/{r['name']}", "ms", "lower", False, figure=figure_of(r, "time_ms")) for r in records]


def _markdown(records: list[dict]) -> str:
    from reports.render import table

    return table([{"name": r["name"], "time (ms)": cell(r, "time_ms"), **r["extra"]} for r in records])


SHARD_CACHE = Benchmark(
    name="shard_cache",
    title="Shard caching: cached views against re-slicing every bucket",
    record=RECORD,
    run=lambda settings: run_pytest_benchmarks("benchmarks/test_shard_cache.py", settings.smoke),
    metrics=_metrics,
    markdown=_markdown,
    on_ranks=False,
)

PLANNING = Benchmark(
    name="planning",
    title="Planner speed (no tensor storage allocated)",
    record=RECORD,
    run=lambda settings: run_pytest_benchmarks("benchmarks/test_planning.py", settings.smoke),
    metrics=_metrics,
    markdown=_markdown,
    on_ranks=False,
)
