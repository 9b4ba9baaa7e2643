"""The simulated backward, worked by hand: when each collective runs and what the step costs.

Every case computes params in backward order, 1 s each unless said; a
bucket's collective time is looked up by its size in bytes.
"""

import pytest
import torch

from benchmarks.tuner.curve import CollectiveCurve
from benchmarks.tuner.schedule import (
    DENSE_GROUP,
    EXPERT_GROUP,
    BucketTiming,
    Schedule,
    SimulatedBucket,
    buckets_of,
    collective_for,
    simulate,
    simulate_layout,
)
from reference.layout import LayoutConfig, ParamSpec, plan_layout


def steps(*names, seconds=1.0):
    return [(name, seconds) for name in names]


def by_size(times: dict[int, float]):
    return lambda size_bytes: times[size_bytes]


TWO = [SimulatedBucket("b0", 100, ("p3", "p2")), SimulatedBucket("b1", 200, ("p1", "p0"))]
THREE = [SimulatedBucket("b0", 100, ("p5", "p4")), SimulatedBucket("b1", 200, ("p3", "p2")), SimulatedBucket("b2", 300, ("p1", "p0"))]
SIX = steps("p5", "p4", "p3", "p2", "p1", "p0")


def test_two_buckets_compute_bound():
    # b0's last grad (p2) is ready at 2 s: its 0.5 s collective runs 2 - 2.5, hidden behind p1 and p0.
    # b1's last grad (p0) is ready at 4 s: it runs 4 - 4.5, after compute: exposed 0.5 s.
    s = simulate(TWO, steps("p3", "p2", "p1", "p0"), by_size({100: 0.5, 200: 0.5}), launch_cost_s=0.0)
    assert [(t.ready_s, t.start_s, t.end_s) for t in s.buckets] == [(2, 2, 2.5), (4, 4, 4.5)]
    assert (s.compute_s, s.launch_s, s.compute_end_s, s.step_s) == (4, 0, 4, 4.5)
    assert s.exposed_s == 0.5 and s.hidden_s == 0.5


def assert_three_compute_bound(simulator):
    # Each collective (1.5, 1.5, 0.25 s) is shorter than the next bucket's compute (2 s): it ends before the
    # next one is ready, and only the last is exposed.
    # b0 ready 2, runs 2 - 3.5; b1 ready 4, runs 4 - 5.5; b2 ready 6, runs 6 - 6.25.
    s = simulator(THREE, SIX, by_size({100: 1.5, 200: 1.5, 300: 0.25}), launch_cost_s=0.0)
    assert [(t.ready_s, t.start_s, t.end_s) for t in s.buckets] == [(2, 2, 3.5), (4, 4, 5.5), (6, 6, 6.25)]
    assert (s.compute_s, s.step_s, s.exposed_s) == (6, 6.25, 0.25)
    assert s.communication_s == 3.25 and s.hidden_s == 3.0


def test_three_buckets_compute_bound():
    assert_three_compute_bound(simulate)


def test_three_buckets_communication_bound():
    # Collectives of 3 s, longer than a bucket's 2 s of compute, queue on the one stream:
    # b0 ready 2, runs 2 - 5; b1 ready 4, waits for b0, runs 5 - 8; b2 ready 6, runs 8 - 11.
    # Compute ends at 6: exposed 11 - 6 = 5 s. Hidden: b0 whole (3 s) and b1's 5 - 6 (1 s) = 4 s;
    # exposed = 9 s of collectives - 4 s hidden = 5 s.
    s = simulate(THREE, SIX, by_size({100: 3.0, 200: 3.0, 300: 3.0}), launch_cost_s=0.0)
    assert [(t.ready_s, t.start_s, t.end_s) for t in s.buckets] == [(2, 2, 5), (4, 5, 8), (6, 8, 11)]
    assert [t.queued_s for t in s.buckets] == [0, 1, 2]
    assert (s.compute_end_s, s.step_s, s.exposed_s, s.communication_s, s.hidden_s) == (6, 11, 5, 9, 4)


def test_launch_cost_delays_the_backward_and_each_bucket():
    # 0.1 s to launch each bucket, on the backward's critical path:
    # p3 ends 1, p2 ends 2, b0 launched at 2.1 (ready); p1 ends 3.1, p0 ends 4.1, b1 launched at 4.2.
    # b0 runs 2.1 - 2.6, b1 runs 4.2 - 4.7. compute 4 + launch 0.2 = 4.2; step 4.7; exposed 0.5.
    s = simulate(TWO, steps("p3", "p2", "p1", "p0"), by_size({100: 0.5, 200: 0.5}), launch_cost_s=0.1)
    assert [t.ready_s for t in s.buckets] == pytest.approx([2.1, 4.2])
    assert [t.end_s for t in s.buckets] == pytest.approx([2.6, 4.7])
    assert (s.compute_s, s.launch_s) == pytest.approx((4.0, 0.2))
    assert (s.compute_end_s, s.step_s, s.exposed_s) == pytest.approx((4.2, 4.7, 0.5))
    assert s.step_s == pytest.approx(s.compute_s + s.launch_s + s.exposed_s)


def test_the_launch_cost_has_no_default():
    with pytest.raises(TypeError, match="launch_cost_s"):
        simulate(TWO, steps("p3", "p2", "p1", "p0"), by_size({100: 0.5, 200: 0.5}))


TWO_BUFFERS = [  # buffer A holds p3 and p1, buffer B p2 and p0; given buffer by buffer
    SimulatedBucket("A0", 10, ("p3",)), SimulatedBucket("A1", 11, ("p1",)),
    SimulatedBucket("B0", 20, ("p2",)), SimulatedBucket("B1", 21, ("p0",)),
]


def assert_two_buffers_interleave(simulator):
    # Ready: A0 at 1, B0 at 2, A1 at 3, B1 at 4. Collectives of 1.5 s, one stream, in ready order:
    # A0 1 - 2.5, B0 2.5 - 4, A1 4 - 5.5, B1 5.5 - 7. Step 7, exposed 7 - 4 = 3.
    s = simulator(TWO_BUFFERS, steps("p3", "p2", "p1", "p0"), lambda size: 1.5, launch_cost_s=0.0)
    assert [t.bucket.label for t in s.buckets] == ["A0", "B0", "A1", "B1"]
    assert [(t.start_s, t.end_s) for t in s.buckets] == [(1, 2.5), (2.5, 4), (4, 5.5), (5.5, 7)]
    assert (s.step_s, s.exposed_s) == (7, 3)


def test_two_buffers_interleave_on_one_stream_in_ready_order():
    assert_two_buffers_interleave(simulate)


def test_compute_that_readies_no_grad_still_takes_time():
    # A tied embedding's output projection (2 s, no grad) runs first: b0 ready at 4, b1 at 6.
    s = simulate(TWO, [(None, 2.0), *steps("p3", "p2", "p1", "p0")], lambda size: 0.5, launch_cost_s=0.0)
    assert [t.ready_s for t in s.buckets] == [4, 6] and s.step_s == 6.5


# Broken simulators each check catches.


def off_by_one_simulator(buckets, compute, collective_seconds, *, launch_cost_s):
    """Starts bucket k when bucket k-1's last grad is ready (bucket 0 at the backward's start)."""
    right = simulate(buckets, compute, collective_seconds, launch_cost_s=launch_cost_s)
    early = [0.0] + [t.ready_s for t in right.buckets[:-1]]
    return _replayed(right, early, collective_seconds)


def buffer_by_buffer_simulator(buckets, compute, collective_seconds, *, launch_cost_s):
    """Runs collectives in the order the buckets are given (buffer by buffer), not in ready order."""
    right = simulate(buckets, compute, collective_seconds, launch_cost_s=launch_cost_s)
    ready = {t.bucket.label: t.ready_s for t in right.buckets}
    by_given = sorted(right.buckets, key=lambda t: buckets.index(t.bucket))
    return _replayed(Schedule(tuple(by_given), right.compute_s, right.launch_s, right.compute_end_s, 0.0),
                     [ready[t.bucket.label] for t in by_given], collective_seconds)


def _replayed(schedule, ready, collective_seconds):
    timings, end = [], 0.0
    for timing, at in zip(schedule.buckets, ready):
        start = max(at, end)
        end = start + collective_seconds(timing.bucket.size_bytes)
        timings.append(BucketTiming(timing.bucket, at, start, end))
    return Schedule(tuple(timings), schedule.compute_s, schedule.launch_s, schedule.compute_end_s,
                    max(schedule.compute_end_s, end))


def test_an_off_by_one_bucket_schedule_fails_the_worked_case():
    # It would start b2 at 4 (b1's ready time), ending 4.25: the step would be 6, not 6.25.
    with pytest.raises(AssertionError):
        assert_three_compute_bound(off_by_one_simulator)
    s = off_by_one_simulator(THREE, SIX, by_size({100: 1.5, 200: 1.5, 300: 0.25}), launch_cost_s=0.0)
    assert s.step_s == 6.0


def test_a_buffer_by_buffer_schedule_fails_the_worked_case():
    # A0 1 - 2.5, A1 3 - 4.5, B0 4.5 - 6, B1 6 - 7.5: the step would be 7.5, not 7.
    with pytest.raises(AssertionError):
        assert_two_buffers_interleave(buffer_by_buffer_simulator)
    s = buffer_by_buffer_simulator(TWO_BUFFERS, steps("p3", "p2", "p1", "p0"), lambda size: 1.5,
                                   launch_cost_s=0.0)
    assert s.step_s == 7.5


# From a planned layout.

SPECS = [ParamSpec("a", (100,)), ParamSpec("b", (50,)), ParamSpec("c", (30,))]


def test_buckets_of_a_layout_worked_by_hand():
    # padded, dp=2, bucket_size=60, fp32. Reverse order c, b, a; divisor lcm(2, 128) = 128.
    # c at 0 - 30 (30 < 60, open); b at pad(30, 64) = 64 - 114 (114 >= 60: close, end pad(114, 128) = 128);
    # a at 128 - 228 (100 >= 60: close, end pad(228, 128) = 256).
    # Buckets (0, 128) and (128, 256): 128 padded elements each, 512 bytes (unpadded: 114 and 100).
    layout = plan_layout(SPECS, LayoutConfig(dp=2, policy="padded", bucket_size=60))
    buckets = buckets_of(layout)
    assert [(b.size_bytes, b.params, b.group) for b in buckets] == [(512, ("c", "b"), DENSE_GROUP),
                                                                    (512, ("a",), DENSE_GROUP)]
    assert [list(b.params) for b in buckets] == [layout.buffers[0].bucket_param_names(i) for i in range(2)]
    assert [b.size_bytes for b in buckets_of(layout, element_bytes=2)] == [256, 256]


def test_the_grad_dtype_sets_the_bytes():
    # bf16 params reduced in fp32: 4 bytes per element, not 2. Packed, one bucket of 180 elements.
    specs = [ParamSpec(s.name, s.shape, torch.bfloat16) for s in SPECS]
    assert buckets_of(plan_layout(specs, LayoutConfig(grad_reduce_in_fp32=True)))[0].size_bytes == 720
    assert buckets_of(plan_layout(specs, LayoutConfig()))[0].size_bytes == 360


def test_the_curve_is_read_at_the_padded_size():
    # Bucket 0 of the worked layout: 114 elements unpadded (456 B), 128 padded (512 B). The curve's smallest
    # point is 500 B, so 456 B reads the 1 ms floor, while 512 B reads between 500 B (1 ms) and 1000 B (4 ms):
    # time grows as size**2 there, 1 ms * (512 / 500)**2 = 1.048576 ms.
    curve = CollectiveCurve.from_points("reduce_scatter", 2, [(500, 1e-3), (1000, 4e-3)])
    layout = plan_layout(SPECS, LayoutConfig(dp=2, policy="padded", bucket_size=60))
    compute = steps("c", "b", "a", seconds=1e-3)
    s = simulate_layout(layout, compute, curve, launch_cost_s=0.0)
    assert s.buckets[0].collective_s == pytest.approx(1.048576e-3)
    # Reading the unpadded size instead (a broken builder) gives a different time, and so a different step.
    buffer = layout.buffers[0]
    unpadded = [SimulatedBucket(b.label, numel * 4, b.params)
                for b, numel in zip(buckets_of(layout), buffer.per_bucket_numel_unpadded)]
    broken = simulate(unpadded, compute, curve, launch_cost_s=0.0)
    assert broken.buckets[0].collective_s == pytest.approx(1e-3)
    assert broken.step_s != pytest.approx(s.step_s)


def test_expert_buffers_use_their_own_group_collective_time():
    specs = [ParamSpec("dense", (64,)), ParamSpec("expert", (64,), expert_parallel=True)]
    layout = plan_layout(specs, LayoutConfig(dp=4, expert_dp=2))
    assert [b.group for b in buckets_of(layout)] == [DENSE_GROUP, EXPERT_GROUP]
    # Backward: expert (1 s), then dense (1 s). Expert bucket ready at 1, 0.25 s; dense ready at 2, 0.5 s.
    times = {DENSE_GROUP: lambda size: 0.5, EXPERT_GROUP: lambda size: 0.25}
    s = simulate_layout(layout, steps("expert", "dense"), times, launch_cost_s=0.0)
    assert [(t.bucket.group, t.start_s, t.end_s) for t in s.buckets] == [(EXPERT_GROUP, 1, 1.25),
                                                                        (DENSE_GROUP, 2, 2.5)]
    with pytest.raises(ValueError, match=r"missing \['expert-dp'\]"):
        simulate_layout(layout, steps("expert", "dense"), {DENSE_GROUP: lambda n: 0.5}, launch_cost_s=0.0)


def test_the_collective_follows_the_policy():
    assert collective_for(LayoutConfig(policy="packed")) == "all_reduce"
    assert collective_for(LayoutConfig(dp=2, policy="padded")) == "reduce_scatter"


# Bad input, refused before any work.


@pytest.mark.parametrize("buckets, compute, words", [
    ([], steps("p0"), "buckets: got none"),
    ([SimulatedBucket("b0", 1, ())], steps("p0"), "holds no params"),
    ([SimulatedBucket("b0", 1, ("p0",)), SimulatedBucket("b1", 1, ("p0",))], steps("p0"), "'p0' is in b0 and b1"),
    ([SimulatedBucket("b0", 1, ("p0", "p1"))], steps("p0"), "got no time for 'p1'"),
    ([SimulatedBucket("b0", 1, ("p0",))], steps("p0", "p1"), "1 params in no bucket"),
    ([SimulatedBucket("b0", 1, ("p0",))], steps("p0", "p0"), "got 'p0' twice"),
    ([SimulatedBucket("b0", 1, ("p0",))], [("p0", -1.0)], "compute time of 'p0': got -1.0"),
    ([SimulatedBucket("b0", 1, ("p0",))], [("p0", float("nan"))], "compute time of 'p0': got nan"),
])
def test_bad_input_is_refused(buckets, compute, words):
    with pytest.raises(ValueError, match=words):
        simulate(buckets, compute, lambda size: 1.0, launch_cost_s=0.0)


def test_a_bad_launch_cost_or_collective_time_is_refused():
    with pytest.raises(ValueError, match="launch_cost_s: got -0.1"):
        simulate(TWO, steps("p3", "p2", "p1", "p0"), lambda size: 1.0, launch_cost_s=-0.1)
    with pytest.raises(ValueError, match=r"collective time of b0 \(100 bytes\): got inf"):
        simulate(TWO, steps("p3", "p2", "p1", "p0"), lambda size: float("inf"), launch_cost_s=0.0)
    with pytest.raises(ValueError, match="element_bytes: got 0"):
        buckets_of(plan_layout(SPECS, LayoutConfig()), element_bytes=0)


# Contention: a collective running beside the backward slows it down.


def assert_contention_slows_the_backward(simulator):
    # Contention 0.5: while a collective runs the backward goes at half speed.
    # b0 ready at 2 runs 2 - 2.5; meanwhile p1 does 0.25 s of its 1 s, so it ends at 2.5 + 0.75 = 3.25;
    # p0 ends 4.25; b1 ready at 4.25 runs 4.25 - 4.75 after compute. Slowed 0.25, exposed 0.5, step 4.75.
    s = simulator(TWO, steps("p3", "p2", "p1", "p0"), lambda size: 0.5, launch_cost_s=0.0, contention=0.5)
    assert [(t.ready_s, t.start_s, t.end_s) for t in s.buckets] == [(2, 2, 2.5), (4.25, 4.25, 4.75)]
    assert (s.compute_s, s.slowed_s, s.compute_end_s, s.exposed_s, s.step_s) == (4, 0.25, 4.25, 0.5, 4.75)
    assert s.step_s == s.compute_s + s.launch_s + s.slowed_s + s.exposed_s


def test_contention_slows_the_backward_while_a_collective_runs():
    assert_contention_slows_the_backward(simulate)


def test_contention_ends_with_the_collective_and_slows_launches_too():
    # Contention 0.5, launch 0.5 s. p3 ends 1, p2 ends 2, b0's launch 2 - 2.5 (ready; nothing runs yet).
    # Collectives of 3 s: b0 runs 2.5 - 5.5. p1 at half speed 2.5 - 4.5; p0 at half speed until 5.5 (0.5 s of
    # its work), the rest at full speed: ends 6; b1's launch 6 - 6.5 (ready), b1 runs 6.5 - 9.5.
    s = simulate(TWO, steps("p3", "p2", "p1", "p0"), lambda size: 3.0, launch_cost_s=0.5, contention=0.5)
    assert [(t.ready_s, t.start_s, t.end_s) for t in s.buckets] == [(2.5, 2.5, 5.5), (6.5, 6.5, 9.5)]
    assert (s.compute_end_s, s.slowed_s, s.exposed_s, s.step_s) == (6.5, 1.5, 3.0, 9.5)
    # Collectives of 5 s: b0 runs 2.5 - 7.5, p1 2.5 - 4.5 and p0 4.5 - 6.5 at half speed, and b1's launch too:
    # 6.5 - 7.5 (ready); b1 runs 7.5 - 12.5.
    s = simulate(TWO, steps("p3", "p2", "p1", "p0"), lambda size: 5.0, launch_cost_s=0.5, contention=0.5)
    assert [(t.ready_s, t.start_s, t.end_s) for t in s.buckets] == [(2.5, 2.5, 7.5), (7.5, 7.5, 12.5)]
    assert (s.compute_end_s, s.slowed_s, s.exposed_s, s.step_s) == (7.5, 2.5, 5.0, 12.5)


def test_each_collective_may_take_its_own_share():
    # Collectives of 1.5 s; b0 takes half the backward's speed, b1 none. b0 ready 2, runs 2 - 3.5: p3 does
    # 0.75 s by 3.5 and ends 3.75; p2 ends 4.75; b1 runs 4.75 - 6.25 beside p1 (4.75 - 5.75) and p0 (- 6.75)
    # at full speed; b2 ready 6.75 runs 6.75 - 8.25. (Half for every collective: the backward ends at 7.5.)
    shares = {"b0": 0.5, "b1": 0.0, "b2": 0.5}
    s = simulate(THREE, SIX, lambda size: 1.5, launch_cost_s=0.0,
                 contention=lambda bucket, seconds: shares[bucket.label])
    assert [(t.ready_s, t.end_s) for t in s.buckets] == [(2, 3.5), (4.75, 6.25), (6.75, 8.25)]
    assert (s.compute_end_s, s.slowed_s, s.step_s) == (6.75, 0.75, 8.25)
    assert simulate(THREE, SIX, lambda size: 1.5, launch_cost_s=0.0, contention=0.5).compute_end_s == 7.5


def contention_ignored_simulator(buckets, compute, collective_seconds, *, launch_cost_s, contention):
    """Leaves the contention out: collectives cost the backward nothing."""
    return simulate(buckets, compute, collective_seconds, launch_cost_s=launch_cost_s)


def test_a_schedule_that_ignores_contention_fails_the_worked_case():
    # It would end the backward at 4, b1 at 4.5: the step 4.5, not 4.75.
    with pytest.raises(AssertionError):
        assert_contention_slows_the_backward(contention_ignored_simulator)


@pytest.mark.parametrize("contention", [-0.1, 1.0, float("nan"), True])
def test_a_contention_outside_zero_to_one_is_refused(contention):
    with pytest.raises(ValueError, match="contention of b0: got"):
        simulate(TWO, steps("p3", "p2", "p1", "p0"), lambda size: 1.0, launch_cost_s=0.0,
                 contention=contention)
