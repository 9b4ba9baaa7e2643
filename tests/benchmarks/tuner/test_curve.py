"""The collective time curve, worked by hand: measured points, log-log between, floor, extrapolation (what a
simulated backward reads: the curve called at a size)."""

import math

import pytest

from benchmarks.tuner.curve import CollectiveCurve

# 1000 B in 1 ms, 4000 B in 9 ms: time grows as size**1.585 between them, not linearly.
POINTS = [(1000, 1e-3), (4000, 9e-3)]


def curve(points=POINTS, collective="all_reduce", world_size=2):
    return CollectiveCurve.from_points(collective, world_size, points)


def test_exact_at_measured_points():
    c = curve()
    assert [c(size) for size in (1000, 4000)] == pytest.approx([1e-3, 9e-3], rel=1e-12)


def test_between_points_log_log_midpoint_worked_by_hand():
    # 2000 B is halfway between 1000 and 4000 in log(size), so log(time) is halfway between log(1 ms) and
    # log(9 ms): time = sqrt(1 * 9) = 3 ms. A linear interpolation would give 1 + 8 * 1000 / 3000 = 3.667 ms.
    assert curve()(2000) == pytest.approx(3e-3, rel=1e-12)


def test_below_the_smallest_size_is_the_latency_floor():
    assert curve()(10) == pytest.approx(1e-3) and curve()(999) == pytest.approx(1e-3)


def test_above_the_largest_size_holds_its_bus_bandwidth():
    # 4000 B in 9 ms: twice the size at the same bandwidth takes 18 ms.
    assert curve()(8000) == pytest.approx(18e-3)


def test_several_samples_of_a_size_are_reduced_to_their_median():
    c = curve([(1000, 5e-3), (1000, 1e-3), (1000, 2e-3), (4000, 9e-3)])
    assert c.sizes == (1000, 4000) and c.seconds == (2e-3, 9e-3)


def test_world_size_conversion_worked_by_hand():
    # all-reduce busbw factor 2(n-1)/n: at 2 ranks 2 * 1/2 = 1, at 8 ranks 2 * 7/8 = 1.75. Equal busbw means
    # time_8 = time_2 * 1.75 / 1: 1 ms becomes 1.75 ms, 9 ms becomes 15.75 ms.
    c8 = curve().at_world_size(8)
    assert c8.world_size == 8 and c8.seconds == pytest.approx((1.75e-3, 15.75e-3))
    assert "from world size 2 to 8" in c8.assumption and "bus bandwidth" in c8.assumption
    assert "1.75" in c8.assumption
    assert curve().assumption == ""


def test_reduce_scatter_conversion_uses_its_own_factor():
    # reduce-scatter factor (n-1)/n: 3/4 at 4 ranks, 7/8 at 8 ranks: time x (7/8) / (3/4) = 7/6.
    c8 = curve(collective="reduce_scatter", world_size=4).at_world_size(8)
    assert c8.seconds == pytest.approx((1e-3 * 7 / 6, 9e-3 * 7 / 6))


@pytest.mark.parametrize("wrong_factor", [
    lambda collective, n: 1.0,  # algbw held instead of busbw: no change with world size
    lambda collective, n: n / (2 * (n - 1)),  # the factor inverted
    lambda collective, n: n - 1,  # ring steps instead of nccl-tests' factor
])
def test_a_wrong_bus_factor_fails_the_worked_conversion(monkeypatch, wrong_factor):
    monkeypatch.setattr("benchmarks.tuner.curve.bus_factor", wrong_factor)
    with pytest.raises(AssertionError):
        test_world_size_conversion_worked_by_hand()


@pytest.mark.parametrize("points, words", [
    ([], "got none"),
    ([(0, 1e-3)], "size_bytes: got 0"),
    ([(-5, 1e-3)], "size_bytes: got -5"),
    ([(1000, 0.0)], "seconds: got 0.0"),
    ([(1000, -1e-3)], "seconds: got -0.001"),
    ([(1000, math.nan)], "seconds: got nan"),
])
def test_bad_points_are_refused(points, words):
    with pytest.raises(ValueError, match=words):
        curve(points)


def test_unknown_collective_is_refused():
    with pytest.raises(ValueError, match="collective: got 'broadcast', but should be one of all_reduce"):
        curve(collective="broadcast")


def test_one_rank_is_refused_and_says_the_time_is_zero():
    with pytest.raises(ValueError, match="world_size: got 1.*nothing crosses a bus.*time there is 0"):
        curve().at_world_size(1)
    with pytest.raises(ValueError, match="the curve's world_size: got 1"):
        curve(world_size=1).at_world_size(8)

