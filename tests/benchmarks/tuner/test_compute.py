"""Per-parameter backward times: shares by FLOPs worked by hand under a fake timer, and one real run."""

import math

import pytest
import torch

from benchmarks.tuner.compute import (
    METHODS,
    Budget,
    LinearShape,
    calibrate,
    profile_flop_rate,
    profile_given_total,
    profile_measured_layers,
)
from reference.layout import ParamSpec

# A linear layer 3 -> 4 with bias, then a norm of width 3, in parameters() order.
SPECS = [ParamSpec("layer.weight", (4, 3)), ParamSpec("layer.bias", (4,)), ParamSpec("norm.weight", (3,))]
# At 10 tokens: weight 4 * 10 * 12 = 480 FLOPs, bias 2 * 10 * 4 = 80, norm 2 * 10 * 3 = 60; 620 in all.
BACKWARD = ["norm.weight", "layer.bias", "layer.weight"]  # the reverse of parameters()
ROOMY = Budget(seconds=1.0, bytes=math.inf)


class FakeTimer:
    """Seconds of a shape's backward at ``rate`` FLOP/s, or a fixed time per shape; records what it timed."""

    def __init__(self, rate=1e9, fixed=None):
        self.rate, self.fixed, self.timed = rate, fixed or {}, []

    def __call__(self, shape, samples):
        self.timed.append(shape)
        return [self.fixed.get((shape.out, shape.inp), shape.flops / self.rate)] * samples


def times(profile):
    return dict(profile.backward())


def test_given_total_is_spread_by_flops_worked_by_hand():
    # 620 ms over 620 FLOPs: 1 ms a FLOP-share unit. Tokens cancel out of the shares.
    profile = profile_given_total(SPECS, 0.620)
    assert [step.name for step in profile.steps] == BACKWARD
    assert times(profile) == pytest.approx({"norm.weight": 0.060, "layer.bias": 0.080, "layer.weight": 0.480})
    assert profile.method.startswith(METHODS[2]) and "620 ms" in profile.method
    # A numel share (12, 4, 3 of 19) would give the weight 392 ms, not 480: the check tells them apart.
    assert times(profile)["layer.weight"] != pytest.approx(0.620 * 12 / 19)


def test_measured_layer_time_is_shared_by_flops_worked_by_hand():
    # The layer 4x3 + bias takes 10 ms: weight 480 / 560 of it, bias 80 / 560. The norm, of no linear layer,
    # runs at the timed layers' rate: 560 FLOPs / 10 ms = 56,000 FLOP/s, so 60 FLOPs take 60 / 56,000 s.
    timer = FakeTimer(fixed={(4, 3): 0.010})
    profile = profile_measured_layers(SPECS, 10, device="cpu", budget=ROOMY, timer=timer)
    assert times(profile) == pytest.approx({"layer.weight": 0.010 * 480 / 560, "layer.bias": 0.010 * 80 / 560,
                                            "norm.weight": 60 / 56_000})
    assert profile.method == METHODS[0]
    assert LinearShape(4, 3, 10, torch.float32, True) in timer.timed
    assert list(profile.measurements) == ["linear 4x3 + bias, float32, 10 tokens"]
    assert any("timed layers' rate, 5.6e-05 GFLOP/s" in note for note in profile.notes)


def test_flop_count_at_a_measured_rate_worked_by_hand():
    # A fake device at 1 GFLOP/s. Calibration with 0.08 s a sample: width 128 takes 4 * 128**3 / 1e9 = 8.4 ms,
    # under an eighth (10 ms); width 256 takes 67 ms: it stands. Its rate is 1 GFLOP/s, so the weight's 480 FLOPs
    # take 480 ns.
    timer = FakeTimer(rate=1e9)
    profile = profile_flop_rate(SPECS, 10, device="cpu", budget=Budget(0.08, math.inf), timer=timer)
    assert profile.method == f"{METHODS[1]} at a measured rate of 1 GFLOP/s (float32)"
    assert times(profile) == pytest.approx({"layer.weight": 480e-9, "layer.bias": 80e-9, "norm.weight": 60e-9})
    assert list(profile.measurements) == ["linear 256x256, float32, 256 tokens"]


def test_a_shape_past_the_budget_is_timed_smaller_and_scaled_up():
    # Budget 10 ms at 1 GFLOP/s: 1e7 FLOPs a sample. The layer 1024x512 at 4096 tokens holds
    # 4 * 4096 * 1024 * 512 = 8.6e9. Tokens halve to 128 (2.7e8, still over), then outputs to 32
    # (4 * 128 * 32 * 512 = 8.4e6 <= 1e7; 64 would be 1.7e7): 32 x fewer tokens, 32 x fewer outputs.
    specs = [ParamSpec("big.weight", (1024, 512))]
    timer = FakeTimer(rate=1e9)
    profile = profile_measured_layers(specs, 4096, device="cpu", budget=Budget(0.01, math.inf), timer=timer)
    assert timer.timed[-1] == LinearShape(32, 512, 128, torch.float32, False)
    assert times(profile)["big.weight"] == pytest.approx(4 * 4096 * 1024 * 512 / 1e9)  # scaled back up
    (note,) = profile.notes
    assert "timed at 128 tokens x 32 outputs" in note and "x1024" in note


def test_the_budget_bytes_also_shrink_a_shape():
    # 1 MB: the 1024x512 fp32 weight alone holds 2 MiB; with its grad 4 MiB. Outputs halve until it fits.
    shape = LinearShape(1024, 512, 128, torch.float32, False)
    assert not shape.fits(math.inf, 1e6)
    timer = FakeTimer(rate=1e9)
    profile_measured_layers([ParamSpec("big.weight", (1024, 512))], 128, device="cpu",
                            budget=Budget(1.0, 1e6), timer=timer)
    assert timer.timed[-1].bytes <= 1e6 and timer.timed[-1].out < 1024


def test_a_tied_embedding_projects_first_and_is_ready_last():
    # Embedding 100 x 8 shared with the output layer, a linear 8x8; per 10 tokens (tokens cancel out):
    # projection 4 * 10 * 800 = 32,000 FLOPs, first, readying no grad; the linear 4 * 10 * 64 = 2,560;
    # the lookup 1 * 10 * 8 = 80, last. Given 34.64 ms: 1 us a FLOP.
    specs = [ParamSpec("embedding.word_embeddings.weight", (100, 8), shared_embedding=True),
             ParamSpec("layer.weight", (8, 8))]
    profile = profile_given_total(specs, 34.64e-3)
    names, seconds = zip(*profile.backward())
    assert names == (None, "layer.weight", "embedding.word_embeddings.weight")
    assert seconds == pytest.approx((32e-3, 2.56e-3, 80e-6))


def test_calibration_stops_at_an_eighth_of_the_budget():
    # At 1 GFLOP/s widths 128, 256, 512 take 8.4 ms, 67 ms, 537 ms; a budget of 1 s stops at 512 (>= 125 ms).
    calibration = calibrate(torch.float32, Budget(1.0, math.inf), FakeTimer(rate=1e9))
    assert calibration.shape.out == 512 and calibration.rate == pytest.approx(1e9)
    assert calibration.flops(Budget(1.0, math.inf)) == pytest.approx(1e9)


def test_a_real_run_on_a_tiny_shape():
    profile = profile_measured_layers(SPECS, 16, device="cpu", budget=Budget(0.001, 2**20))
    assert all(seconds > 0 for _, seconds in profile.backward())
    (figure,) = profile.measurements.values()
    assert figure.n == 7 and figure.interval is not None and figure.interval[0] <= figure.median
    rate = profile_flop_rate(SPECS, 16, device="cpu", budget=Budget(0.001, 2**20))
    assert rate.method.startswith(METHODS[1]) and rate.total_s > 0


@pytest.mark.parametrize("call, words", [
    (lambda: profile_given_total([], 1.0), "specs: got none"),
    (lambda: profile_given_total(SPECS, 0.0), "total_s: got 0.0"),
    (lambda: profile_given_total([ParamSpec("w", (2, 2), requires_grad=False)], 1.0), "frozen parameter 'w'"),
    (lambda: profile_flop_rate(SPECS, 0, timer=FakeTimer()), "tokens: got 0"),
    (lambda: profile_flop_rate(SPECS, 8, samples=0, timer=FakeTimer()), "samples: got 0"),
    (lambda: profile_measured_layers([ParamSpec("norm.weight", (3,))], 8, timer=FakeTimer()),
     "got no linear layer"),
    (lambda: Budget(0.0, 1.0), "budget seconds: got 0.0"),
])
def test_bad_input_is_refused(call, words):
    with pytest.raises(ValueError, match=words):
        call()
