"""A quick measurement for bisecting a copy of this project in the tests: the reference's layout planner timed
(``python tests/reports/bisect/measure_planner.py OUT``), written as a run with one metric, ``bisect/plan_ms``, into the runs
root OUT, with the checkout's own store. Run in a commit's worktree, it times that commit's planner."""

import sys
import time
from pathlib import Path

from benchmarks.registry import Metric
from benchmarks.stats import Figure
from datamodel import to_json
from reference.layout.planner import LayoutConfig, ParamSpec, plan_layout
from reports.store.runs import Runs, dump_json, run_name
from tests.reports.builders import results

SAMPLES = 15
CALLS = 100


def plan_ms() -> list[float]:
    params = [ParamSpec(f"layer{i}.weight", (512, 512 + i)) for i in range(200)]
    config = LayoutConfig(dp=8)
    plan_layout(params, config)  # warm
    samples = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        for _ in range(CALLS):
            plan_layout(params, config)
        samples.append((time.perf_counter() - start) * 1e3 / CALLS)
    return samples


if __name__ == "__main__":
    figure = Figure.of(plan_ms(), "ms", "lower")
    metric = Metric(figure.median, "ms", "lower", gated=True, exact=False, figure=figure)
    made = results(run_name(), metrics={"bisect/plan_ms": metric})
    Runs(Path(sys.argv[1])).write(made.run.name, {"results.json": dump_json(to_json(made))})
