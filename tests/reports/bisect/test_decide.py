"""The three-way answer on runs whose move is planted: a 10% move is moved, no move is the same, one run of each
side alone is never an answer, one run of the candidate is once the good commit's runs show their spread, and
runs that scatter as widely as the move leave it unknown."""

import numpy as np
import pytest

from reports.bisect.decide import decide


def runs(level: float, spread: float, count: int = 2, rounds: int = 9, seed: int = 0, offsets=None):
    """``count`` runs of ``rounds`` rounds each; a run's level is ``level`` times its offset (1 unless given)."""
    rng = np.random.default_rng(seed)
    offsets = offsets or [1.0] * count
    return [list(level * k * (1 + spread * rng.standard_normal(rounds))) for k in offsets]


def test_a_ten_percent_move_is_moved_either_way():
    good = runs(100.0, 0.01)
    assert decide(good, runs(110.0, 0.01, seed=1), threshold=0.05).outcome == "moved"
    assert decide(good, runs(90.0, 0.01, seed=1), threshold=0.05).outcome == "moved"


def test_no_move_is_the_same_when_the_runs_rule_out_the_threshold():
    got = decide(runs(100.0, 0.01), runs(100.0, 0.01, seed=1), threshold=0.05)
    assert got.outcome == "same" and 0.95 < got.interval[0] <= got.ratio <= got.interval[1] < 1.05, got


def test_one_run_a_side_is_never_an_answer_however_far_apart():
    """Two processes of the same code may sit 8.5% apart: one pair of runs cannot tell that from a move."""
    with pytest.raises(ValueError, match="runs: got one a side, but at least one side needs two"):
        decide(runs(100.0, 0.005, count=1), runs(108.5, 0.005, count=1, seed=1), threshold=0.05)


def test_one_run_of_the_candidate_is_judged_by_the_good_commits_spread_between_runs():
    steady = runs(100.0, 0.003, count=4, offsets=[1.0, 1.002, 0.998, 1.001])
    assert decide(steady, runs(110.0, 0.003, count=1, seed=1), threshold=0.05).outcome == "moved"
    assert decide(steady, runs(100.0, 0.003, count=1, seed=1), threshold=0.05).outcome == "same"
    scattered = runs(100.0, 0.003, count=4, offsets=[0.95, 1.05, 0.97, 1.04])
    got = decide(scattered, runs(110.0, 0.003, count=1, seed=1), threshold=0.05)
    assert got.outcome == "unknown", f"runs 10% apart from each other cannot place one run: got {got.describe()}"


def test_runs_that_agree_by_chance_are_no_narrower_than_their_rounds_allow():
    """Two runs whose medians coincide leave the spread between runs at 0; the rounds still say how well each
    median is known."""
    good = [[90.0, 100.0, 110.0, 95.0, 105.0]] * 2
    got = decide(good, [[91.0, 101.0, 111.0, 96.0, 106.0]], threshold=0.05)
    assert got.interval[1] / got.interval[0] > 1.05 and got.outcome != "same", got


def test_runs_whose_levels_scatter_as_much_as_the_move_are_unknown():
    good = runs(100.0, 0.005, offsets=[0.94, 1.06])
    got = decide(good, runs(100.0, 0.005, seed=1, offsets=[1.0, 1.12]), threshold=0.05)
    assert got.outcome == "unknown", got


def test_a_significant_move_below_the_threshold_is_not_moved():
    got = decide(runs(100.0, 0.002, rounds=20), runs(102.0, 0.002, rounds=20, seed=1), threshold=0.05)
    assert got.p_value < 0.05 and got.outcome == "same", got


@pytest.mark.parametrize("good, candidate, threshold, message", [
    ([], [[1.0, 2.0]], 0.05, "runs: got 0 and 1, but should be at least one a side"),
    ([[1.0, 1.1]], [[1.0, 2.0]], 0, "threshold: got 0, but should be between 0 and 1"),
])
def test_no_runs_or_no_threshold_is_refused(good, candidate, threshold, message):
    with pytest.raises(ValueError, match=message):
        decide(good, candidate, threshold)
