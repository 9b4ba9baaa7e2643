"""Comparing tensors across implementations: bitwise where achievable, documented tolerances elsewhere.

Tolerances (docs/rules.md, section 3): fp32 at world size > 2 or after a norm
reduction, rtol 1.3e-6 / atol 1e-5; bf16, 1.6e-2 both.
"""

from __future__ import annotations

import torch

FP32_TOL = dict(rtol=1.3e-6, atol=1e-5)
BF16_TOL = dict(rtol=1.6e-2, atol=1.6e-2)


def tolerance(bitwise: bool, bf16: bool) -> dict | None:
    if bitwise:
        return None
    return BF16_TOL if bf16 else FP32_TOL


def assert_close(got: torch.Tensor, want: torch.Tensor, tol: dict | None, what: str) -> None:
    got, want = got.detach().float().cpu(), want.detach().float().cpu()
    assert got.shape == want.shape, f"{what} shape: got {tuple(got.shape)}, but should be {tuple(want.shape)}"
    if tol is None:
        if not torch.equal(got, want):
            diff = (got - want).abs()
            raise AssertionError(
                f"{what}: got values differing in {int((diff > 0).sum())} of {got.numel()} elements "
                f"(max |diff| {diff.max().item():.3e}), but should be bitwise equal"
            )
        return
    if not torch.allclose(got, want, **tol):
        diff = (got - want).abs()
        raise AssertionError(
            f"{what}: got max |diff| {diff.max().item():.3e}, but should be within rtol={tol['rtol']}, "
            f"atol={tol['atol']}"
        )


def agreed(ctx, check) -> None:
    """Run ``check()`` on every rank and raise on all of them if it failed on any.

    A rank whose own comparison passed would otherwise walk into the next
    collective and wait for a peer that already failed (until the timeout).
    """
    try:
        check()
        mine = None
    except AssertionError as exc:
        mine = str(exc)
    everyone: list = [None] * ctx.world_size
    torch.distributed.all_gather_object(everyone, mine, group=ctx.control_group)
    if mine is not None:
        raise AssertionError(mine)
    failed = [(rank, msg) for rank, msg in enumerate(everyone) if msg is not None]
    if failed:
        rank, msg = failed[0]
        raise AssertionError(f"rank {rank} failed this comparison: {msg}")
