"""Sampling calibrated to a target: when it stops, what it drops as warm-up, and what it records.

The rounds here are made up (no ranks, no timers: ``sample`` with no context
decides alone), so each rule is seen acting on samples whose interval is known.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from benchmarks.sampling import (GATE_RULES, RoundProgress, Sampled, Sampling, Target, TargetOutcome, carried,
                                 launch_target, rotating_round, rounds_left, sample, settled)
from benchmarks.stats import Figure


def rounds_of(values):
    """A round function that keeps the next value of ``values`` and returns it as the round's time."""
    kept, source = [], iter(values)

    def one_round(index: int, keep: bool) -> float:
        value = next(source)
        if keep:
            kept.append(value)
        return value

    return kept, one_round


def test_a_target_is_met_when_the_interval_of_the_median_is_inside_it():
    steady = Figure.of([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0], "x", "lower")
    wide = Figure.of([1.0, 1.3, 0.7, 1.2, 0.8, 1.1, 0.9, 1.25, 0.75, 1.0], "x", "lower")
    target = Target(0.02, "relative")
    assert target.met(steady) and not target.met(wide)
    assert target.achieved(wide) > 0.1, "half of [0.8, 1.2] over a median of 1 is 0.2"
    assert Target(0.03, "absolute").label() == "±0.03" and target.label() == "±2%"
    assert not target.met(Figure.of([1.0, 1.0], "x", "lower")), "no interval below 6 samples: not met"


def test_sampling_stops_once_the_targets_are_met():
    kept, one_round = rounds_of(itertools.cycle([1.0, 1.001, 0.999]))
    record = sample(None, Sampling(min_rounds=10, fixed_warmup=0), one_round,
                    lambda: {"ratio": (Figure.of(kept, "x", "lower"), GATE_RULES["ratio"].target)})
    assert record.stopped == "targets met" and record.rounds == 10 == len(kept), record
    assert record.targets["ratio"].met and record.targets_met


def test_sampling_goes_on_while_the_interval_is_too_wide_and_stops_at_max_rounds():
    kept, one_round = rounds_of(itertools.cycle([1.0, 1.5, 0.6, 1.4]))
    record = sample(None, Sampling(min_rounds=10, max_rounds=40, fixed_warmup=0), one_round,
                    lambda: {"ratio": (Figure.of(kept, "x", "lower"), Target(0.02, "relative"))})
    assert record.stopped == "max rounds" and record.rounds == 40, record
    assert record.targets["ratio"] == TargetOutcome("±2%", "relative", record.targets["ratio"].achieved, False)


def test_sampling_stops_when_its_budget_is_spent(monkeypatch):
    clock = itertools.count(0.0, 1.0)  # every reading of the clock is a second later
    monkeypatch.setattr("benchmarks.sampling.time.monotonic", lambda: next(clock))
    kept, one_round = rounds_of(itertools.cycle([1.0, 1.5, 0.6, 1.4]))
    record = sample(None, Sampling(budget_s=5.0, min_rounds=3, fixed_warmup=0), one_round,
                    lambda: {"ratio": (Figure.of(kept, "x", "lower"), Target(0.02, "relative"))})
    assert record.stopped == "budget spent" and record.rounds < 10, record


def test_a_fixed_count_is_kept_whatever_the_figures_say():
    kept, one_round = rounds_of(itertools.cycle([1.0, 1.5, 0.6]))
    record = sample(None, Sampling(fixed_rounds=4, fixed_warmup=1), one_round,
                    lambda: {"ratio": (Figure.of(kept, "x", "lower"), Target(0.02, "relative"))})
    assert (record.rounds, record.warmup, record.stopped) == (4, 1, "fixed rounds"), record
    assert kept == [1.5, 0.6, 1.0, 1.5], "the first round was warm-up, dropped"


def test_warm_up_drops_rounds_until_the_round_time_settles():
    # A cold start: 5, 4, 3, 2 seconds, then steady at 1. After 9 rounds the last three (1, 1, 1) and the three
    # before (2, 1, 1) have the same median: settled, 9 rounds dropped.
    kept, one_round = rounds_of([5.0, 4.0, 3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, *([1.0] * 20)])
    record = sample(None, Sampling(fixed_rounds=3), one_round, dict)
    assert record.warmup_settled and record.warmup == 9, record
    assert kept == [1.0, 1.0, 1.0]


def test_warm_up_that_never_settles_is_capped_and_says_so():
    kept, one_round = rounds_of(1.2**i for i in itertools.count())  # 20% slower every round: never settles
    record = sample(None, Sampling(fixed_rounds=2, max_warmup=7), one_round, dict)
    assert (record.warmup, record.warmup_settled) == (7, False), record


def test_settling_compares_two_windows_of_medians():
    assert settled([2.0, 1.0, 1.0, 1.0, 1.02, 0.99, 1.0])
    assert not settled([3.0, 2.0, 1.5, 1.0, 1.0, 1.0])
    assert not settled([1.0] * 5), "two windows of three are needed"


@pytest.mark.parametrize("changes, field", [({"min_rounds": 0}, "min_rounds"), ({"budget_s": 0.0}, "budget_s"),
                                            ({"fixed_rounds": 0}, "rounds")])
def test_bad_sampling_settings_are_named(changes, field):
    with pytest.raises(ValueError, match=f"{field}: got"):
        Sampling(**changes)


def test_every_gate_rule_aims_tighter_than_it_gates():
    """A change the size of the threshold must stand out of the interval the sampling aims for."""
    for name, rule in GATE_RULES.items():
        assert rule.target.half_width < rule.threshold, name


def test_a_figure_that_missed_its_target_is_not_gated_this_run():
    from benchmarks.registry import MetricSampling, gated

    figure = Figure.of([1.0, 1.3, 0.7, 1.2, 0.8, 1.1, 0.9, 1.25, 0.75, 1.0], "x", "lower")
    record = Sampled(rounds=10, warmup=0, warmup_settled=None, stopped="budget spent", seconds=1.0, budget_s=1.0,
                     targets={"reference": TargetOutcome("±2%", "relative", 0.2, False)})
    missed = gated(figure, "ratio", record, "reference")
    assert not missed.gated and missed.sampling == MetricSampling(target="±2%", rounds=10, met=False,
                                                                  stopped="budget spent")
    met = gated(figure, "ratio", replace(record, targets={"reference": TargetOutcome("±2%", "relative", 0.01, True)}),
                "reference")
    fixed = gated(figure, "ratio", replace(record, stopped="fixed rounds"), "reference")
    assert met.gated and fixed.gated, "met, or a count the user fixed: gated by its rule"
    assert met.threshold == 0.03, "the rule's threshold travels with the metric"


def test_a_gated_figure_refused_so_far_has_not_met_its_target():
    """A noise-bound denominator may clear its noise with more rounds: sampling goes on, never 'targets met'."""
    kept, one_round = rounds_of(itertools.cycle([1.0, 1.001, 0.999]))
    record = sample(None, Sampling(min_rounds=10, max_rounds=30, fixed_warmup=0), one_round,
                    lambda: {"steady": (Figure.of(kept, "x", "lower"), GATE_RULES["ratio"].target),
                             "refused": (None, GATE_RULES["ratio"].target)})
    assert record.stopped == "max rounds" and record.rounds == 30, record
    assert record.targets["refused"] == TargetOutcome("±2%", "relative", None, False), record.targets
    assert not Target(0.02, "relative").met(None)


def test_a_rotating_round_times_every_op_once_and_starts_one_later_each_round():
    calls = []
    ops = {name: (lambda name=name, seconds=seconds: calls.append(name) or seconds)
           for name, seconds in (("a", 1.0), ("b", 2.0), ("c", 4.0))}
    kept = {"a": [], "b": [], "c": []}
    one_round = rotating_round(ops, kept)
    assert one_round(0, False) == 7.0, "a round's time is the sum of its ops' times"
    assert kept == {"a": [], "b": [], "c": []}, "a warm-up round keeps nothing"
    for index in (1, 2, 3):
        one_round(index, True)
    assert calls == [*"abc", *"bca", *"cab", *"abc"], f"got the order {calls}, but each round should start one later"
    assert kept == {"a": [1.0] * 3, "b": [2.0] * 3, "c": [4.0] * 3}


def test_time_left_is_the_fixed_rounds_or_the_budget():
    # 4 of 10 fixed rounds in 2 s: 6 more at 0.5 s. A 30 s budget 10 s in: 20 s. A 5 s budget spent with 5 of
    # the 10 minimum rounds still to run at 2 s each: 10 s.
    assert rounds_left(Sampling(fixed_rounds=10), kept=4, elapsed=2.0) == 3.0
    assert rounds_left(Sampling(budget_s=30.0, min_rounds=10), kept=5, elapsed=10.0) == 20.0
    assert rounds_left(Sampling(budget_s=5.0, min_rounds=10), kept=5, elapsed=10.0) == 10.0


def test_round_progress_says_a_line_a_second_at_most():
    lines = []
    shown = RoundProgress(lines.append, "verification", Sampling(fixed_rounds=100))
    for kept in range(1, 50):
        shown(kept, 0.001)
    assert lines == ["verification: round 1, about 0 s left"], lines


def test_each_launch_samples_to_the_target_the_launches_to_come_would_narrow_to_the_goal():
    goal = Target(0.02, "relative")
    widths = [launch_target(goal, k, 3).half_width for k in (1, 2, 3)]
    assert widths == pytest.approx([0.034641, 0.024495, 0.02], abs=1e-6), "2% times sqrt(3/1), sqrt(3/2), 1"
    assert launch_target(goal, 1, 1) == goal and launch_target(Target(0.03, "absolute"), 1, 4).kind == "absolute"


def test_a_launch_counts_the_rounds_and_seconds_of_those_before_it():
    first = Sampled(12, 5, True, "targets met", 3.5, 30.0, {}, 1)
    second = Sampled(20, 4, False, "budget spent", 30.25, 30.0, {"x": TargetOutcome("±2%", "relative", 0.025, False)})
    both = carried(first, second)
    assert (both.rounds, both.warmup, both.warmup_settled, both.seconds, both.budget_s, both.launches) == (
        32, 9, False, 33.75, 60.0, 2)
    assert (both.stopped, both.targets) == (second.stopped, second.targets), "the last launch's stop and targets"
    assert carried(None, second) == second
