"""Comparing tensors across implementations: bitwise where achievable, bounds derived from the arithmetic elsewhere.

Against torch DDP (docs/rules.md, section 3): bitwise at world size 2 in
fp32; fp32 at world size > 2 or after a norm reduction, rtol 1.3e-6 / atol
1e-5; bf16, 1.6e-2 both (torch DDP's own rounding is not known element by
element). Against the single-process oracle, every grad, norm, zero count
and param bound is derived from the composition (``Arithmetic``,
docs/rules.md, section 7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


def agreed_candidates(ctx, checks) -> list[int]:
    """Which of several checks, each an accepted way to be right, passed on every rank (in their order); when none
    did, raise the first one's failure on every rank, as ``agreed`` does."""
    mine: list[str | None] = []
    for check in checks:
        try:
            check()
            mine.append(None)
        except AssertionError as exc:
            mine.append(str(exc))
    everyone: list = [None] * ctx.world_size
    torch.distributed.all_gather_object(everyone, mine, group=ctx.control_group)
    passed = [i for i in range(len(checks)) if all(theirs[i] is None for theirs in everyone)]
    if passed:
        return passed
    if mine[0] is not None:
        raise AssertionError(mine[0])
    rank, msg = next((rank, theirs[0]) for rank, theirs in enumerate(everyone) if theirs[0] is not None)
    raise AssertionError(f"rank {rank} failed this comparison: {msg}")


UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8}
"""Half the spacing of the dtype's numbers near 1: the most one rounding moves a value, relative to it."""


@dataclass(frozen=True)
class Arithmetic:
    """What rounds between each rank's microbatch grads and what a composition compares, and so how far a correct
    implementation may lie from the oracle (docs/rules.md, section 7)."""

    reduced_in: torch.dtype
    """The dtype grads are added up and reduced in: fp32, or bf16 with bf16 params whose grads are not fp32."""
    params_in: torch.dtype
    roundings: int
    """Roundings along one element's longest chain: the microbatch additions, the scaling, the sum over the ranks
    (each addition), a division (AVG, tokens) and the cast back."""
    world_size: int
    stepped_in: torch.dtype = torch.float32
    """The dtype the optimizer's update is computed in: fp32 main params, or the params' own dtype."""

    @classmethod
    def of(cls, case, world_size: int, in_param_dtype: bool = False) -> "Arithmetic":
        reduced = torch.float32 if not case.bf16 or case.fp32_grads else torch.bfloat16
        return cls(reduced, case.dtype, case.microbatches + world_size + 2, world_size,
                   case.dtype if in_param_dtype else torch.float32)

    def grad_bound(self, magnitude: torch.Tensor) -> torch.Tensor:
        """The most a correct reduced element may differ from the oracle's, both computed from the same params:
        each rounding of either chain moves the running sum by at most its unit roundoff times the sum of the
        magnitudes added so far (the oracle adds in fp32)."""
        return self.roundings * (UNIT_ROUNDOFF[self.reduced_in] + UNIT_ROUNDOFF[torch.float32]) * magnitude

    def param_bound(self, before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
        """The most a param may differ from the oracle's after one update both take from the same start, grads and
        norm: the update's own arithmetic (the clip coefficient, the optimizer's roundings, at most ``UPDATE_ULPS``
        of the largest update of the tensor), the addition to the param (one rounding of it) and, for a bf16 param,
        one rounding of its fp32 master."""
        u = UNIT_ROUNDOFF[self.stepped_in]
        update = (after.double() - before.double()).abs().max()
        return 2 * u * before.abs() + UPDATE_ULPS * u * update + 2 * UNIT_ROUNDOFF[self.params_in] * after.abs()

    def norm_rounding(self, numel: int, tensors: int) -> float:
        """Relative error of a grad norm an implementation computes from these grads (docs/rules.md, section 7):
        within each tensor a pairwise sum of squares in fp32 (log2 of its size roundings), then the tensors'
        norms added one by one, then over the ranks, then a root, twice (the oracle's too); where the grads are
        bf16, the tensors' norms and their sum may each be rounded to bf16 once more."""
        u32, ugrad = UNIT_ROUNDOFF[torch.float32], UNIT_ROUNDOFF[self.reduced_in]
        fp32 = 2 * (math.ceil(math.log2(max(numel, 2))) + tensors + self.world_size + 2) * u32
        return fp32 if self.reduced_in == torch.float32 else fp32 + (3 + self.world_size) * ugrad


UPDATE_ULPS = 16
"""Roundings of an optimizer's update, in ulps of the largest update: Adam's moments (2 and 3), their bias
corrections (2), the root, the epsilon, the division and the learning rate (4), and the clip coefficient's and the
grad's last bit (2), doubled for the two sides."""


def assert_within(got: torch.Tensor, want: torch.Tensor, bound: torch.Tensor, what: str) -> None:
    """Element-wise ``|got - want| <= bound``; the message names the worst element and its bound."""
    got, want, bound = (t.detach().double().cpu().reshape(-1) for t in (got, want, bound))
    assert got.shape == want.shape, f"{what} shape: got {tuple(got.shape)}, but should be {tuple(want.shape)}"
    within = (got - want).abs() <= bound  # False for NaN, as a NaN must be
    if not within.all():
        excess = torch.where(within, torch.zeros_like(bound), ((got - want).abs() - bound).nan_to_num(math.inf))
        i = int(excess.argmax())
        raise AssertionError(
            f"{what}: got {int((~within).sum())} of {got.numel()} elements past the rounding bound; element {i} "
            f"is {got[i].item():.9g}, but should be {want[i].item():.9g} within {bound[i].item():.3g} (derived from "
            f"the arithmetic, docs/rules.md section 7)")
