"""Results for tests: a run of the current model with what a test gives, the rest empty or plain."""

from __future__ import annotations

from dataclasses import replace

from benchmarks.busbw import BusbwRecord
from benchmarks.overlap import OverlapRecord
from benchmarks.sampling import Sampled
from benchmarks.settings import Model
from benchmarks.stats import Figure
from benchmarks.timeline import Timeline
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
    run = Run(name=name, host="test", setup=setup(smoke=smoke, backend=backend, **(setup_changes or {})))
    made = Results(schema=SCHEMA, run=run, settings=None, nodes=(), conformance=(), suite_world_size=None, explorations=(),
                   strength=(), benchmarks=Records(**{k: tuple(v) for k, v in records.items()}), overhead=(),
                   metrics={}, comparison=None, trend=(), claims=(), mutation=None, verdict=None, plots=())
    made = replace(made, **fields)
    return replace(made, metrics=collect_metrics(made) if metrics is None else metrics)


SAMPLED = Sampled(rounds=3, warmup=0, warmup_settled=None, stopped="fixed rounds", seconds=0.1, budget_s=1.0,
                  targets={})


def around(median: float, unit: str, better: str = "higher", spread_kind: str = "relative") -> Figure:
    """Six samples within 2% of ``median``."""
    return Figure.of([median * x for x in (0.98, 1.0, 1.02, 0.99, 1.01, 1.0)], unit, better, spread_kind)


def busbw_record(wrong: int = 0, collective: str = "all_reduce", policy: str = "padded",
                 placement: str = "in-place", requested: int = 2**18 - 37, count: int = 2**18,
                 busbw: float = 10.0) -> BusbwRecord:
    """One cell of a bus-bandwidth sweep at 2 ranks, ``wrong`` bad elements."""
    return BusbwRecord(collective=collective, policy=policy, placement=placement, size_bytes=4 * count,
                       count=count, requested_count=requested, element_type="float32", redop="sum",
                       time_us=around(100.0, "us", "lower"), calls=1, algbw_gbps=around(busbw, "GB/s"),
                       busbw_gbps=around(busbw, "GB/s"), effective_busbw_gbps=around(busbw * requested / count, "GB/s"),
                       effective_ratio_to_unpadded=None, refused=None, sampling=SAMPLED, wrong=wrong, world_size=2,
                       backend="gloo")


def overlap_record(impl: str = "reference", overlap_ms: float = 12.0, efficiency: float = 0.6,
                   timeline: Timeline | None = None) -> OverlapRecord:
    """One implementation's emulated overlap: compute 10 ms, serial 15 ms."""
    return OverlapRecord(mode="emulated", impl=impl, model=Model(depth=4), collective_ms=1.25, wait_ms=1.25,
                         compute_ms=around(10.0, "ms", "lower"), overlap_ms=around(overlap_ms, "ms", "lower"),
                         serial_ms=around(15.0, "ms", "lower"), communication_ms=around(5.0, "ms", "lower"),
                         refused=None, dropped_rounds=0, efficiency=around(efficiency, "", spread_kind="absolute"),
                         ideal=0.875, share=around(efficiency / 0.875, "", spread_kind="absolute"), sampling=SAMPLED,
                         sleep_overshoot=None, timeline=timeline, world_size=2, backend="gloo")


def bucket_size_record(width: int = 256, depth: int = 64, recommended: int | None = 2**20,
                       within: tuple = (2**20, 2**21), verified: bool = True,
                       steps: tuple[float, float, float] = (100.0, 120.0, 130.0), backend: str = "gloo"):
    """The bucket-size benchmark on a ``depth`` x Linear(``width``) model: the recommendation and its range
    (elements) as given, its three sizes measured at ``steps`` ms (recommended, far smaller, far larger), each
    predicted exactly."""
    from benchmarks.tuner.records import BucketSizeRecord
    from benchmarks.tuner.records import Check, CurvePoint, MeasuredInputs, Recommendation, Verification

    roles = (("recommended", recommended), ("far smaller", width * width), ("far larger", None))
    checks = tuple(Check(role, size, 1, around(ms, "ms", "lower"), around(ms, "ms", "lower"),
                         around(0.0, "", "lower", "absolute")) for (role, size), ms in zip(roles, steps))
    inputs = MeasuredInputs("all_reduce", 2, (CurvePoint(4096, around(1.0, "ms", "lower")),),
                            around(0.5, "ms", "lower"), around(90.0, "ms", "lower"),
                            around(0.4, "ms/MB", "lower", "absolute"), "measured")
    return BucketSizeRecord(impl="reference", model=Model(width=width, depth=depth, batch=4, wait_ratio=2.0),
                            wait_ms=2.0, inputs=inputs, predictions=(),
                            recommendation=Recommendation(recommended, 5.0, 0.05, within),
                            verification=Verification(checks, 0.1, verified,
                                                      () if verified else ("recommended off by -20.0%",),
                                                      "every prediction within ±10%" if verified else ""),
                            sampling=SAMPLED, sleep_overshoot=None, world_size=2, backend=backend)


def prediction(size, exposed: float, compute: float = 100.0):
    """A candidate's prediction whose step is ``compute`` plus ``exposed`` ms, all of it unhidden
    communication."""
    from benchmarks.tuner.records import Prediction

    return Prediction(bucket_size=size, origins=("grid",), buckets=1, padding=0, padding_pct=0.0,
                      compute_ms=compute, launch_ms=0.0, slowed_ms=0.0, unhidden_ms=exposed,
                      exposed_ms=exposed, step_ms=compute + exposed, share=exposed / (compute + exposed))
