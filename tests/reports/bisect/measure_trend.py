"""A quick, steady measurement for bisecting a copy of this project in the tests: the trend's change-point
detection (``reports.comparison.series.change_points``) of the commit timed against the same function from a
control copy of the module that the planted history leaves as it is (this checkout's), pair by pair, the order
alternating. The machine's speed wanders by several percent between processes here; within a pair both sides
run the same code a few milliseconds apart, so it cancels: the ratio of two identical copies varies by a few
tenths of a percent between runs. Written as a run with one figure, ``bisect/change_points_ratio`` (every pair's
ratio), into the runs root given (``python tests/reports/bisect/measure_trend.py OUT CONTROL``, CONTROL the
control's ``series.py``), through the checkout's own store; torch is never imported."""

import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.registry import Metric
from benchmarks.stats import Figure
from datamodel import to_json
from reports.comparison.series import change_points
from reports.store.model import Point
from reports.store.runs import Runs, dump_json, run_name
from tests.reports.builders import results

PAIRS = 120
NIGHTS = 30
METRIC = "bisect/change_points_ratio"


def series() -> list[Point]:
    """Nights with two steps on a seeded noise."""
    nights = np.arange(NIGHTS)
    level = np.where(nights < 12, 1.0, np.where(nights < 21, 1.1, 1.05))
    values = level + np.random.default_rng(0).normal(0, 0.01, NIGHTS)
    return [Point(f"night{i}", float(v), (float(v) - 0.01, float(v) + 0.01)) for i, v in enumerate(values)]


def control(path: Path):
    """The control's ``change_points``: its module loaded beside the commit's package (whose modules it imports)."""
    spec = importlib.util.spec_from_file_location("reports.comparison._control_series", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.change_points


def ratios(reference) -> list[float]:
    points = series()
    change_points(points), reference(points)  # warm
    out = []
    for i in range(PAIRS):
        times = {}
        for name, fn in (("commit", change_points), ("control", reference))[:: 1 if i % 2 else -1]:
            start = time.perf_counter()
            fn(points)
            times[name] = time.perf_counter() - start
        out.append(times["commit"] / times["control"])
    return out


if __name__ == "__main__":
    figure = Figure.of(ratios(control(Path(sys.argv[2]))), "x", "lower")
    metric = Metric(figure.median, "x", "lower", gated=True, exact=False, figure=figure)
    made = results(run_name(), metrics={METRIC: metric})
    Runs(Path(sys.argv[1])).write(made.run.name, {"results.json": dump_json(to_json(made))})
