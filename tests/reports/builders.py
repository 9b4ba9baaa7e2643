"""Results for tests: a run of the current model with what a test gives, the rest empty or plain."""

from __future__ import annotations

from dataclasses import replace

from reports.store.metrics import collect_metrics
from reports.store.model import SCHEMA, Records, Results, Run, Setup


def setup(**changes) -> Setup:
    base = Setup(backend="gloo", tensors="cpu", world_size=2, mode="plain", nodes=1, devices=("cpu: test",),
                 smoke=False, method=4)
    return replace(base, **changes)


def results(name: str = "20260101T000000Z", *, smoke: bool = False, backend: str = "gloo", metrics=None,
            setup_changes: dict | None = None, **fields) -> Results:
    """A run named ``name``; ``fields`` replace Results' (``benchmarks`` may be a dict of records); metrics are
    collected from the records unless given."""
    records = fields.pop("benchmarks", {})
    run = Run(name=name, host="test", mode="plain", world_size=2, backend=backend, tensors="cpu", smoke=smoke,
              setup=setup(smoke=smoke, backend=backend, **(setup_changes or {})))
    made = Results(schema=SCHEMA, run=run, settings=None, nodes=(), conformance=(), suite_world_size=None,
                   strength=(), benchmarks=Records(**{k: tuple(v) for k, v in records.items()}), overhead=(),
                   metrics={}, comparison=None, trend=(), claims=(), mutation=None, verdict=None, plots=())
    made = replace(made, **fields)
    return replace(made, metrics=collect_metrics(made) if metrics is None else metrics)
