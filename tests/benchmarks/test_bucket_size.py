"""The bucket-size benchmark's plan and verdicts, worked by hand on a small model."""

from benchmarks.tuner.measure import Plan, _moved
from benchmarks.settings import Model
from benchmarks.tuner.records import Recommendation, Verification

# 8 layers of 64 x 64 = 4,096 elements (16 KiB fp32): 32,768 elements in all.
PLAN = Plan(Model(width=64, depth=8, batch=4), world_size=2)


def test_the_candidates_start_at_one_layer_and_the_curve_holds_every_bucket_size():
    # Grid 4,096 to 16,384 (32,768 is the model); torch's 25 MiB (6,553,600) and upstream's 40M hold the whole
    # model in one bucket, as one bucket does.
    assert [c.bucket_size for c in PLAN.candidates] == [4_096, 8_192, 16_384, 6_553_600, 40_000_000, None]
    # Buckets of 1, 2, 4 and 8 layers: 16, 32, 64 and 128 KiB; the contention's all-reduce (half the model,
    # 64 KiB) is one of them.
    assert PLAN.curve_bytes == [16_384, 32_768, 65_536, 131_072]
    assert PLAN.beside_bytes == 65_536


def test_a_size_with_the_recommendations_very_buckets_is_not_measured_twice():
    # 25 MiB makes one bucket, as one bucket does: far larger would measure the recommendation again.
    assert PLAN.verified_sizes(6_553_600) == {"recommended": 6_553_600, "far smaller": 4_096}
    assert PLAN.verified_sizes(8_192) == {"recommended": 8_192, "far smaller": 4_096, "far larger": None}


VERIFIED = Verification((), 0.1, True, (), "every prediction within ±10%")


def test_a_recommendation_measured_but_no_longer_within_5_percent_is_unverified():
    moved = _moved(PLAN, 4_096, Recommendation(16_384, 5.0, 0.05, (16_384, None)), VERIFIED)
    assert not moved.verified and moved.problems == (
        "the size measured as recommended, 4,096 elements (the calibration's best), is not within 5% of the "
        "verification rounds' best, 16,384 elements",), moved.problems
    assert moved.held == VERIFIED.held, "what held is kept beside the problem, not mixed into it"


def test_a_recommendation_measured_and_still_within_5_percent_stays_verified_and_says_so():
    kept = _moved(PLAN, 8_192, Recommendation(16_384, 5.0, 0.05, (8_192, 16_384)), VERIFIED)
    assert kept.verified and not kept.problems, kept
    assert kept.held.endswith("is within 5% of the verification rounds' best, 16,384 elements"), kept.held
    # The same buckets under another size is the same choice: 40M is one bucket.
    assert _moved(PLAN, 40_000_000, Recommendation(None, 5.0, 0.05, (None,)), VERIFIED) == VERIFIED

