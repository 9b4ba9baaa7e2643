"""A timed figure's statistics, worked by hand: median, interval of the median, spread, instability."""

import math

import pytest

from benchmarks.stats import UNSTABLE_MARK, Figure, describe


def test_median_and_its_95_percent_interval_from_order_statistics():
    """1..15: median 8. Binomial(15, 1/2): P(X <= 3) = 576/32768 = 0.0176, so [x(4), x(12)] covers
    the median with probability 1 - 2 * 0.0176 = 0.965 >= 0.95, and [x(5), x(11)] only 0.882."""
    figure = Figure.of(range(1, 16), "ms", "lower")
    assert figure.median == 8
    assert figure.interval == (4.0, 12.0)


def test_no_interval_below_six_samples():
    """With 5 samples the widest interval [x(1), x(5)] covers the median with 1 - 2/32 = 0.94 < 0.95."""
    assert Figure.of([1, 2, 3, 4, 5], "ms", "lower").interval is None
    assert Figure.of([7.0], "ms", "lower").interval is None
    assert "[n<6]" in describe(Figure.of([7.0], "ms", "lower"))


def test_relative_spread_is_the_iqr_over_the_median():
    # numpy's linear quantiles of 1..15: 4.5 and 11.5, IQR 7, median 8.
    figure = Figure.of(range(1, 16), "ms", "lower")
    assert figure.spread == pytest.approx(7 / 8)
    assert figure.unstable
    quiet = Figure.of([100, 101, 99, 100, 102, 98, 100], "ms", "lower")  # quartiles 99.5, 100.5
    assert quiet.spread == pytest.approx(1 / 100) and not quiet.unstable


def test_efficiencies_spread_absolutely():
    figure = Figure.of([0.60, 0.61, 0.59, 0.62, 0.58, 0.60], "", "higher", spread_kind="absolute")
    assert figure.spread == pytest.approx(0.015)  # sorted: quartiles at 1.25 -> 0.5925 and 3.75 -> 0.6075
    assert not figure.unstable
    wide = Figure.of([0.3, 0.6, 0.2, 0.7, 0.5, 0.4], "", "higher", spread_kind="absolute")
    assert wide.unstable and describe(wide).endswith(UNSTABLE_MARK) and not describe(figure).endswith(UNSTABLE_MARK)


def test_samples_are_kept_compactly_and_round_trip_through_json():
    figure = Figure.of([1.234567891, 2.0], "GB/s", "higher")
    assert figure.samples == (1.23457, 2.0)
    data = figure.to_json()
    assert data["samples"] == [1.23457, 2.0] and data["n"] == 2 and data["ci_low"] is None
    assert Figure.from_json(data) == figure


@pytest.mark.parametrize("kwargs, message", [
    (dict(samples=(), unit="ms", better="lower"), "samples: got none"),
    (dict(samples=(1.0,), unit="ms", better="faster"), "better: got 'faster'"),
    (dict(samples=(1.0,), unit="ms", better="lower", spread_kind="log"), "spread_kind: got 'log'"),
])
def test_bad_figures_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Figure(**kwargs)


def test_non_finite_samples_give_no_interval_and_are_unstable():
    figure = Figure.of([1.0, math.inf, 2.0, 3.0, 4.0, 5.0], "ms", "lower")
    assert figure.interval is None
