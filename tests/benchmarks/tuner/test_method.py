"""Which bucket size: the candidates, a prediction, the recommendation and its range, and the verdict on a
check, each worked by hand."""

import pytest

from benchmarks.stats import Figure
from benchmarks.tuner.method import (
    Candidate,
    Check,
    Inputs,
    Recommendation,
    candidate_sizes,
    predict,
    recommend,
    verification_sizes,
    verify,
)
from reference.layout import LayoutConfig, ParamSpec
from tests.reports.builders import prediction


def test_candidates_are_the_grid_upstreams_default_torchs_25_mib_and_one_bucket():
    # 10M elements at dp 64 in bf16: grid 1M, 2M, 4M, 8M (16M would pass the model); upstream max(40M, 64M) =
    # 64M; torch's 25 MiB / 2 bytes = 13,107,200; one bucket last.
    got = candidate_sizes(10_000_000, 64, 2)
    assert [c.bucket_size for c in got] == [1_000_000, 2_000_000, 4_000_000, 8_000_000, 13_107_200,
                                            64_000_000, None]
    assert got[4].origins == ("torch DDP's 25 MiB",)
    assert got[5].origins == ("upstream's default max(40M, 1M x dp)",)


def test_a_size_that_is_two_candidates_is_listed_once_with_both_reasons():
    # From 13,107,200 the grid's first point is torch's 25 MiB in bf16 itself.
    first = candidate_sizes(100_000_000, 8, 2, smallest=13_107_200)[0]
    assert first == Candidate(13_107_200, ("grid", "torch DDP's 25 MiB"))


# A hand-worked model: four 1M-element fp32 params, a (first in parameters()) to d; backward runs d, c, b, a.
SPECS = [ParamSpec(name, (1_000_000,)) for name in "abcd"]
COMPUTE = [("d", 1e-3), ("c", 1e-3), ("b", 1e-3), ("a", 1e-3)]


def test_a_prediction_worked_by_hand():
    # Packed, dp 2, buckets of 2M elements: (d, c) closes at 2M, (b, a) too; 8 MB each (4 bytes an element).
    # Collective 0.5 ms per 8 MB bucket, 2 ms for the one 16 MB bucket; launch 0.1 ms.
    # Two buckets: b0 ready 2.1 runs 2.1 - 2.6; b1 ready 4.2 runs 4.2 - 4.7: step 4.7, exposed 0.7 ms.
    # One bucket: ready 4.1, runs 4.1 - 6.1: exposed 2.1 ms.
    inputs = Inputs(COMPUTE, lambda size: {8_000_000: 5e-4, 16_000_000: 2e-3}[size], launch_cost_s=1e-4)
    config = LayoutConfig(dp=2, policy="packed")
    two = predict(SPECS, config, Candidate(2_000_000, ("grid",)), inputs)
    one = predict(SPECS, config, Candidate(None, ("one bucket per buffer",)), inputs)
    assert (two.buckets, two.padding, two.compute_ms) == (2, 0, pytest.approx(4.0))
    assert (two.launch_ms, two.unhidden_ms) == pytest.approx((0.2, 0.5))
    assert (two.exposed_ms, two.step_ms) == pytest.approx((0.7, 4.7))
    assert two.share == pytest.approx(0.7 / 4.7)
    assert (one.buckets, one.exposed_ms, one.step_ms) == (1, pytest.approx(2.1), pytest.approx(6.1))


# Exposed 10, 6, 5, 5.2, 5.3, 9 ms: the best is 5 ms (4M); within 5% means at most 5.25 ms: 4M and 8M, not
# 16M.
SYNTHETIC = [prediction(1_000_000, 10.0), prediction(2_000_000, 6.0), prediction(4_000_000, 5.0),
             prediction(8_000_000, 5.2), prediction(16_000_000, 5.3), prediction(None, 9.0)]


def assert_recommends_4m_within_4m_to_8m(recommender):
    got = recommender(SYNTHETIC)
    assert (got.bucket_size, got.exposed_ms, got.within) == (4_000_000, 5.0, (4_000_000, 8_000_000))
    assert (got.low, got.high) == (4_000_000, 8_000_000)


def test_the_recommendation_and_its_5_percent_range_worked_by_hand():
    assert_recommends_4m_within_4m_to_8m(recommend)


def step_based_recommender(predictions, tolerance=0.05):
    """Takes the range within 5% of the best step instead of the best exposed time: 105 ms x 1.05 = 110.25 ms
    lets every size in."""
    best = min(predictions, key=lambda p: p.step_ms)
    within = tuple(p.bucket_size for p in predictions if p.step_ms <= best.step_ms * (1 + tolerance))
    return Recommendation(best.bucket_size, best.exposed_ms, tolerance, within)


def test_a_range_taken_on_the_step_fails_the_worked_case():
    with pytest.raises(AssertionError):
        assert_recommends_4m_within_4m_to_8m(step_based_recommender)
    assert len(step_based_recommender(SYNTHETIC).within) == 6


def test_a_tie_goes_to_the_smaller_size_and_one_bucket_sorts_last():
    got = recommend([prediction(None, 5.0), prediction(40_000_000, 5.0)])
    assert (got.bucket_size, got.within) == (40_000_000, (40_000_000, None))


def test_the_verified_sizes_are_the_recommendation_the_smallest_and_one_bucket():
    sizes = [1_000_000, 2_000_000, 4_000_000, None]
    assert verification_sizes(sizes, 2_000_000) == {"recommended": 2_000_000, "far smaller": 1_000_000,
                                                    "far larger": None}
    assert verification_sizes(sizes, 1_000_000) == {"recommended": 1_000_000, "far larger": None}


def check(role, size, predicted, measured):
    """Six rounds, each measured within 1% of ``measured``; the prediction as given."""
    rounds = [measured * x for x in (0.99, 1.0, 1.01, 0.995, 1.005, 1.0)]
    return Check(role, size, 1, Figure.of([predicted] * 6, "ms", "lower"), Figure.of(rounds, "ms", "lower"),
                 Figure.of([predicted / m - 1 for m in rounds], "", "lower", "absolute"))


CHECKS = [check("recommended", 4_000_000, 100.0, 102.0), check("far smaller", 1_000_000, 120.0, 118.0),
          check("far larger", None, 140.0, 135.0)]


def test_predictions_within_the_target_verify_the_recommendation():
    got = verify(CHECKS)
    assert got.verified and not got.problems and got.held.startswith("every prediction within ±10%"), got


def test_a_measured_step_that_misses_its_prediction_leaves_the_recommendation_unverified():
    # A fake measurement: the recommended size measured at 125 ms against a prediction of 100 ms (-20%).
    missed = [check("recommended", 4_000_000, 100.0, 125.0), *CHECKS[1:]]
    got = verify(missed)
    assert not got.verified
    assert any("recommended (4,000,000 elements) predicted 100 ms, measured 125 ms: off by -20.0%" in p
               for p in got.problems), got.problems


def test_a_size_measured_faster_than_the_recommendation_leaves_it_unverified():
    # Predictions all within 10%, but one bucket measured at 95 ms against the recommendation's 102 ms.
    faster = [*CHECKS[:2], check("far larger", None, 100.0, 95.0)]
    got = verify(faster)
    assert not got.verified, got
    assert any("far larger (one bucket) measured faster than the recommendation" in p for p in got.problems), got


def test_an_unmeasured_recommendation_is_never_verified():
    got = verify(CHECKS[1:])
    assert not got.verified and "the recommended size was not measured" in got.problems


@pytest.mark.parametrize("field, value", [("total_elements", 0), ("dp", 0), ("element_bytes", True)])
def test_bad_candidate_input_is_refused(field, value):
    args = {"total_elements": 10, "dp": 2, "element_bytes": 2, **{field: value}}
    with pytest.raises(ValueError, match=f"{field}: got"):
        candidate_sizes(**args)


def test_no_predictions_make_no_recommendation():
    with pytest.raises(ValueError, match="predictions: got none"):
        recommend([])
