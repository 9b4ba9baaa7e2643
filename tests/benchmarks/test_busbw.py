"""nccl-tests' bandwidth formulas and the sweep's padding, worked by hand."""

import pytest

from benchmarks.busbw import ELEMENT_BYTES, bandwidths, bucket_count
from benchmarks.measuring.busbw import ELEMENT, padded_count


def test_all_reduce_busbw_is_algbw_times_2_n_minus_1_over_n():
    # 1e9 bytes in 1 s at n=4: algbw 1 GB/s, busbw 1 * 2 * 3 / 4 = 1.5 GB/s.
    assert bandwidths("all_reduce", 10**9, 1.0, 4) == pytest.approx((1.0, 1.5))


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_scatter_and_gather_busbw_is_algbw_times_n_minus_1_over_n(collective):
    # 8e9 bytes (the full, gathered size) in 2 s at n=8: algbw 4 GB/s, busbw 4 * 7 / 8 = 3.5 GB/s.
    assert bandwidths(collective, 8 * 10**9, 2.0, 8) == pytest.approx((4.0, 3.5))


def test_buckets_are_deliberately_unaligned():
    count = bucket_count(2**20)  # 1 MiB of fp32 = 262,144 elements; minus 37, made odd
    assert count == 262_107 and count % 128 != 0


def test_policies_pad_as_worked_by_hand():
    count = 262_107
    assert padded_count(count, "unpadded", "all_reduce", 4) == 262_107
    assert padded_count(count, "unpadded", "reduce_scatter", 4) == 262_108  # next multiple of 4
    assert padded_count(count, "padded", "all_reduce", 4) == 262_144  # lcm(4, 128) = 128 -> 2048 * 128
    assert padded_count(count, "high-busbw", "all_reduce", 4) == 262_144  # 65,536 * 4
    assert padded_count(count, "shard-aligned", "all_gather", 4) == 262_144  # 4 * 65,536
    assert padded_count(count, "shard-aligned", "all_gather", 8) == 524_288  # 8 * 65,536


def test_the_records_element_size_is_the_measured_tensors():
    assert ELEMENT.itemsize == ELEMENT_BYTES, "requested_bytes and bucket_count would misstate every size"
