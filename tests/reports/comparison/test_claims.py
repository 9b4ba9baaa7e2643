"""The design notes' bucket-size claims, judged from the bucket-size benchmark's records, per setup."""

import pytest

from reports.comparison.claims import judge_claims

from ..builders import bucket_size_record, results

SWEET, TOO_LARGE = "about 40 MB are the sweet spot", "over 80 MB are too large"


def verdicts(record, backend="gloo"):
    run = results(backend=backend, benchmarks={"bucket_size": [record]})
    return {c.claim: c for c in judge_claims(run)}


def claim(verdicts_, words):
    return next(v for text, v in verdicts_.items() if words in text)


def test_on_gloo_only_the_shape_is_measured_and_the_claims_are_not_measurable():
    got = verdicts(bucket_size_record())
    for words in (SWEET, TOO_LARGE):
        verdict = claim(got, words)
        assert verdict.outcome == "not measurable", verdict
        assert verdict.why.startswith("the claim is about large models' buckets over NCCL"), verdict
        shape = ("recommended 4.19 MB of a 16.8 MB model; measured steps against it: far smaller +20.0%, far "
                 "larger +30.0%")
        assert shape in verdict.measured, verdict.measured


# On NCCL, a 32 x Linear(2048) model: 16.8 MB layers, 537 MB in all.
BIG = {"width": 2048, "depth": 32}


@pytest.mark.parametrize("within, sweet, too_large", [
    ((8 * 2**20, 16 * 2**20), "holds", "holds"),  # 33.6 to 67.1 MB: 40 MB inside, nothing past 80 MB
    ((2**22, 2**23), "does not hold", "holds"),  # 16.8 to 33.6 MB
    ((8 * 2**20, 64 * 2**20), "holds", "does not hold"),  # 33.6 to 268 MB within 5% of the best
])
def test_on_nccl_the_range_within_5_percent_decides(within, sweet, too_large):
    got = verdicts(bucket_size_record(**BIG, recommended=within[0], within=within, backend="nccl"), "nccl")
    assert claim(got, SWEET).outcome == sweet, claim(got, SWEET)
    assert claim(got, TOO_LARGE).outcome == too_large, claim(got, TOO_LARGE)


def test_on_nccl_a_model_too_small_for_the_claimed_sizes_is_not_measured():
    got = verdicts(bucket_size_record(backend="nccl"), "nccl")
    verdict = claim(got, SWEET)
    assert verdict.outcome == "not measured", verdict
    assert verdict.why.startswith("the benchmark model holds 16.8 MB of grads in all"), verdict


def test_an_unverified_prediction_gives_no_verdict():
    got = verdicts(bucket_size_record(**BIG, verified=False, backend="nccl"), "nccl")
    verdict = claim(got, SWEET)
    assert (verdict.outcome, verdict.why) == ("not measured", "the prediction was not verified here (recommended "
                                              "off by -20.0%)"), verdict


def test_without_the_benchmark_the_claims_are_not_measured():
    run = results()
    got = {c.claim: c for c in judge_claims(run)}
    verdict = claim(got, SWEET)
    assert verdict.outcome == "not measured" and verdict.why.startswith("no bucket-size benchmark in this run"), got
