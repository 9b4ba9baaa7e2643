"""Assertion helpers for the layout suite; messages read "got X, but should be Y".

The expected divisors are written out here from docs/rules.md, on purpose
not imported from the reference: the suite must not mirror the code it checks.
"""

from __future__ import annotations

import math

import torch

DISTRIBUTED_POLICIES = ("padded", "high-busbw", "shard-aligned")


def expected_divisor(policy: str, dp: int) -> int:
    """Where bucket ends must fall, per policy (docs/rules.md, section 1; docs/errata.md)."""
    return {
        "packed": 1,
        "padded": math.lcm(dp, 128),
        "high-busbw": math.lcm(dp, 128, 2**16),
        "shard-aligned": math.lcm(dp * 2**16, 128),
    }[policy]


def is_distributed(policy: str) -> bool:
    return policy in DISTRIBUTED_POLICIES


def check(condition: bool, what: str, got, should) -> None:
    assert condition, f"{what}: got {got!r}, but should be {should}"


def check_equal(got, expected, what: str) -> None:
    check(got == expected, what, got, repr(expected))


def check_multiple(value: int, divisor: int, what: str) -> None:
    check(value % divisor == 0, what, value, f"a multiple of {divisor} (remainder {value % divisor})")


def element_offset(view: torch.Tensor, base: torch.Tensor) -> int:
    """Offset of ``view`` inside ``base`` in elements, or fail if it is not a view of it."""
    check(
        view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr(),
        "storage",
        "a separate allocation",
        "a view sharing the buffer's storage",
    )
    delta = view.data_ptr() - base.data_ptr()
    check(delta % base.element_size() == 0, "byte offset", delta, "a whole number of elements")
    return delta // base.element_size()


def check_view_at(view: torch.Tensor, base: torch.Tensor, start: int, what: str) -> None:
    """``view`` lies in ``base`` at element ``start``, and a write through it shows there."""
    check_equal(element_offset(view, base), start, f"{what} offset in buffer")
    check(view.is_contiguous(), f"{what} contiguity", "non-contiguous", "contiguous")
    flat = view.reshape(-1)
    if flat.numel():
        old = flat[0].item()
        flat[0] = 7
        check_equal(base[start].item(), 7, f"{what}: buffer element after a write through the view")
        flat[0] = old
