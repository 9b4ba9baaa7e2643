"""Golden cases worked by hand: upstream's unit-test matrix and the design notes' corrected examples.

The derivations are in docs/errata.md (the notes' examples) and in the comments below
(10 x Linear(95, 95), dp=8). Nothing here is computed by the code under test.
"""

import math

import pytest
import torch

from reference.layout import LayoutConfig, ParamSpec
from suites.params import make_params

from .assertions import check_equal, check_multiple

pytestmark = pytest.mark.requires("layout")

DP = 8
BUCKET_SIZES = [None, 9000, 9025, 9050, 18000, 18050, 20000]

# Buckets per case, in BUCKET_SIZES order. Worked by hand: a weight is 9025
# elements, a bias 95; under "padded" a param starts on a multiple of 64, so a
# (bias, weight) unit spans [0, 95) + [128, 9153) and the next unit starts at 9216.
# A bucket closes once (param end - bucket start) >= bucket_size; layer 0's weight
# is the shared embedding and, under the distributed optimizer only, sits alone.
BUCKET_COUNTS = {
    # (bias, policy, shared)
    (False, "packed", False): [1, 10, 10, 5, 5, 5, 4],  # 9025 | 18050 >= 9050.. | 27075 >= 20000
    (False, "packed", True): [1, 10, 10, 5, 5, 5, 4],  # packed ignores the flag
    (False, "padded", False): [1, 10, 10, 5, 5, 5, 4],  # pairs end at 9088 + 9025 = 18113
    (False, "padded", True): [2, 10, 10, 6, 6, 6, 4],  # layer 1 left alone before layer 0
    (True, "packed", False): [1, 10, 10, 10, 5, 5, 4],  # unit = 9120 >= 9050
    (True, "packed", True): [1, 10, 10, 10, 5, 5, 4],
    (True, "padded", False): [1, 10, 10, 10, 5, 5, 4],  # unit ends at 9153 >= 9050
    (True, "padded", True): [2, 11, 11, 11, 6, 6, 5],  # layer 0's bias gets a bucket of its own
}
# Total numel: every bucket end padded to lcm(8, 128) = 128.
# packed: 10 * 9025 = 90250 (+ 10 * 95 = 91200 with bias); padded: 10 * 9088 = 90880
# and 10 * 9216 = 92160 with bias, whatever the bucket size or shared flag.
NUMEL = {(False, "packed"): 90250, (False, "padded"): 90880, (True, "packed"): 91200, (True, "padded"): 92160}


def linear_stack(bias: bool, shared: bool) -> list[ParamSpec]:
    specs = []
    for layer in range(10):
        specs.append(ParamSpec(f"layers.{layer}.weight", (95, 95), shared_embedding=shared and layer == 0))
        if bias:
            specs.append(ParamSpec(f"layers.{layer}.bias", (95,)))
    return specs


MATRIX = [LayoutConfig(dp=DP, policy=policy, bucket_size=size) for size in BUCKET_SIZES
          for policy in ("packed", "padded")]


@pytest.mark.parametrize("shared", [False, True], ids=["plain", "shared"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("config", MATRIX, ids=[f"{c.bucket_size}-{c.policy}" for c in MATRIX])
def test_upstream_matrix(impl, config, bias, shared):
    bucket_size, policy = config.bucket_size, config.policy
    (buf,) = impl.plan(make_params(linear_stack(bias, shared)), config)
    want_buckets = BUCKET_COUNTS[(bias, policy, shared)][BUCKET_SIZES.index(bucket_size)]
    check_equal(len(buf.bucket_indices), want_buckets, "number of buckets")
    check_equal(buf.numel, NUMEL[(bias, policy)], "buffer numel")
    # Upstream's own checks: padded bucket numel == pad(unpadded, lcm(dp, 128)).
    divisor = math.lcm(DP, 128) if policy == "padded" else 1
    for i, ((lo, hi), unpadded) in enumerate(zip(buf.bucket_indices, buf.per_bucket_numel_unpadded)):
        check_equal(hi - lo, -(-unpadded // divisor) * divisor, f"bucket {i} padded numel")


PADDED, HIGH_BUSBW, SHARD_ALIGNED = (LayoutConfig(policy=p) for p in ("padded", "high-busbw", "shard-aligned"))


@pytest.mark.requires(PADDED)
def test_unpadded_counts_the_gaps_between_params(impl):
    """docs/rules.md: 10 x Linear(95, 95, bias=False), dp=8, one bucket: 90250 raw, 90817, 90880."""
    (buf,) = impl.plan(make_params(linear_stack(False, False)), LayoutConfig(dp=8, policy="padded"))
    check_equal((buf.numel_unpadded, buf.numel), (90_817, 90_880), "(numel_unpadded, numel)")
    # 9 gaps of 9088 - 9025 = 63 elements between the 10 weights: 90250 + 9 * 63 = 90817.


def _one_param(impl, numel, dp, policy):
    specs = [ParamSpec("flat", (numel,), dtype=torch.bfloat16)]
    (buf,) = impl.plan(make_params(specs), LayoutConfig(dp=dp, policy=policy))
    return buf


@pytest.mark.requires(PADDED)
def test_notes_example_1_needs_no_padding(impl):
    """The notes: 10,000,000 -> 10,000,128. Corrected: 10,000,000 = 78,125 * 128 already."""
    check_equal(_one_param(impl, 10_000_000, 8, "padded").numel, 10_000_000, "padded numel at dp=8")


@pytest.mark.requires(HIGH_BUSBW)
def test_notes_example_2_high_busbw_divisor_is_65536(impl):
    """The notes: lcm(64, 128, 65536) = 4,194,304 -> 41,943,040. Corrected: 65,536 -> 611 * 65,536."""
    check_equal(math.lcm(64, 128, 2**16), 65_536, "lcm(64, 128, 2**16)")
    check_equal(_one_param(impl, 40_000_000, 64, "high-busbw").numel, 40_042_496, "high-busbw numel")


@pytest.mark.requires(HIGH_BUSBW)
def test_notes_example_3_high_busbw_shard_is_not_2_16_aligned(impl):
    """The notes: shard 655,360 = 10 * 2**16. Corrected: 40,042,496 / 64 = 625,664, 625,664 % 65,536 =
    35,840."""
    buf = _one_param(impl, 40_000_000, 64, "high-busbw")
    shard = buf.numel // 64
    check_equal((shard, shard % 2**16), (625_664, 35_840), "(shard, shard mod 2**16)")


@pytest.mark.requires(SHARD_ALIGNED)
def test_notes_example_3_intent_needs_shard_aligned_policy(impl):
    """The notes' 41,943,040 / 655,360 is what dp * 2**16 = 4,194,304 alignment gives."""
    buf = _one_param(impl, 40_000_000, 64, "shard-aligned")
    check_equal(buf.numel, 41_943_040, "shard-aligned numel")
    check_multiple(buf.numel // 64, 2**16, "shard-aligned per-rank shard")


@pytest.mark.requires(HIGH_BUSBW)
def test_notes_worst_case_divisor_is_65536(impl):
    """The notes: lcm(128, 128, 65536) = 8,388,608, doubling 8,388,609. Corrected: 65,536 -> 129 * 65,536."""
    buf = _one_param(impl, 8_388_609, 128, "high-busbw")
    check_equal(buf.numel, 8_454_144, "high-busbw numel for 8,388,609 elements at dp=128")
    check_equal(buf.numel - 8_388_609, 65_535, "end padding")


@pytest.mark.requires(HIGH_BUSBW)
def test_high_busbw_divisor_beyond_dp_2_16_is_dp(impl):
    """At dp = 2**17, lcm(2**17, 128, 2**16) = 2**17 (no larger): 1,000 elements pad to 131,072, a shard
    of one element, so high-busbw does not make shards multiples of anything beyond dp's own needs."""
    check_equal(_one_param(impl, 1_000, 2**17, "high-busbw").numel, 131_072, "high-busbw numel at dp=2**17")
