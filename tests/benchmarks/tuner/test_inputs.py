"""The tuner's measured inputs: derived from the timed operations by hand, and the launch cost measured
against an implementation that costs a known 5 ms more per bucket."""

import pytest

from benchmarks.sampling import Sampling, rotating_round, sample
from benchmarks.settings import Model
from benchmarks.stats import Figure
from benchmarks.tuner.inputs import inputs_at, launch_cost, launch_ops, measured_inputs, model_specs
from benchmarks.tuner.method import CONTENTION_CAP, Inputs
from benchmarks.tuner.schedule import SimulatedBucket
from suites.impls import load_implementation
from tests.fakes.slow_launch import DELAY_S

DEPTH = 8


def test_the_inputs_of_each_round_worked_by_hand():
    # Depth 4. Round 1: the per-layer tiny backward 10 ms, the one-bucket one 7 ms: (10 - 7) / 3 = 1 ms a
    # bucket. Compute: the one-bucket backward 101 ms less one launch = 100 ms. Contention: 101 -> 111 ms
    # beside an all-reduce of 8192 B: 10 ms / 0.008192 MB = 1220.7 ms per MB. Round 2: 13 - 7 = 6 / 3 = 2 ms;
    # 102 - 2 = 100 ms; 20 ms / 0.008192 MB = 2441.4 ms per MB.
    times = {"launch/per layer": [0.010, 0.013], "launch/one bucket": [0.007, 0.007],
             "compute": [0.101, 0.102], "compute beside": [0.111, 0.122], "curve/4096": [0.001, 0.002],
             "curve/8192": [0.040, 0.040]}
    inputs = measured_inputs(times, 4, 8192, [8192, 4096], world_size=2)
    assert inputs.launch_ms.samples == pytest.approx((1.0, 2.0))
    assert inputs.compute_ms.samples == pytest.approx((100.0, 100.0))
    assert inputs.contention_ms_per_mb.samples == pytest.approx((1220.7, 2441.41), rel=1e-4)
    assert [p.size_bytes for p in inputs.curve] == [4096, 8192]
    # Round 2's inputs for a 4-layer model: 100 ms spread evenly, 2 ms a launch, 2 ms at 4 KB; 20 ms lost per
    # 8192 B, so an all-reduce of 4096 B lasting 40 ms takes 10 ms of the backward over its 40 ms: a share of
    # 0.25.
    round_two = inputs_at(inputs, 1, model_specs(Model(width=32, depth=4)))
    assert [s for _, s in round_two.compute] == pytest.approx([0.025] * 4)
    assert round_two.launch_cost_s == pytest.approx(0.002)
    assert round_two.collective_seconds(4096) == pytest.approx(0.002)
    assert round_two.share(SimulatedBucket("b", 4096, ("p",)), 0.040) == pytest.approx(0.25, rel=1e-5)  # 6 digits kept


def test_a_contention_below_zero_is_recorded_and_used_as_none_and_a_share_is_capped():
    times = {"launch/per layer": [0.0], "launch/one bucket": [0.0], "compute": [0.1],
             "compute beside": [0.09], "curve/8": [0.01]}
    inputs = measured_inputs(times, 4, 8, [8], world_size=2)
    assert inputs.contention_ms_per_mb.samples[0] < 0  # recorded as measured: faster beside a collective
    assert inputs_at(inputs, 0, model_specs(Model(width=2, depth=4))).contention_s_per_byte == 0.0  # used as none
    heavy = Inputs((), None, 0.0, contention_s_per_byte=1.0)
    assert heavy.share(SimulatedBucket("b", 10, ("p",)), 1.0) == CONTENTION_CAP


def check_launch_costs(ctx, rounds: int) -> list[Figure]:
    """The launch cost of the reference and of the slow-launch fake, side by side in the same rounds."""
    ops = {**launch_ops(ctx, load_implementation("reference"), DEPTH, 4, "reference"),
           **launch_ops(ctx, load_implementation("tests.fakes.slow_launch"), DEPTH, 4, "slow")}
    times = {name: [] for name in ops}
    sample(ctx, Sampling(fixed_rounds=rounds, fixed_warmup=2), rotating_round(ops, times), dict)
    return [Figure.of(launch_cost(times, DEPTH, prefix), "s", "lower") for prefix in ("reference", "slow")]


def test_the_launch_cost_rises_by_a_known_delay_per_bucket(ranks):
    reference, slow = ranks.run(check_launch_costs, 15)[0]
    rise = [s - r for s, r in zip(slow.samples, reference.samples)]
    assert Figure.of(rise, "s", "lower").median == pytest.approx(DELAY_S, rel=0.4), (
        f"launch cost rise: got {sorted(rise)}, but should be about {DELAY_S * 1e3:g} ms a bucket (the "
        "fake's sleep)")
