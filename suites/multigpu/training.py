"""Training the implementation under test side by side with an oracle, comparing every step.

The oracle is torch's own DistributedDataParallel (same init, same per-rank
data) or a single-process model trained on the global batch. Gradients are
compared after the grad sync (under the distributed optimizer only the
elements this rank owns are reduced), params after every optimizer step.
Mixture-of-experts cases (``case.moe``) train ``moe.TinyMoE``, each rank
holding its experts, against the single-process model holding them all.
The two sides, the implementation under test and torch DDP, are
``sides.py``'s.
"""

from __future__ import annotations

import contextlib
import copy
import math

import torch

from suites.impls.protocol import ComputesWith, SeedsMasters, StepsInParamDtype

from .cases import Case
from .bounds import UNIT_ROUNDOFF, Arithmetic, agreed, agreed_candidates, assert_close, assert_within, tolerance
from .oracle import GlobalBatch, Gradient
from .sides import Forward, TorchDDPOracle, UnderTest, global_token_count


def compare_grads(ctx, ours: UnderTest, oracle: dict[str, torch.Tensor], tol, step: int) -> int:
    """Our reduced grads (the elements this rank owns) against the oracle's; returns elements compared."""
    compared = 0
    for name, got, where in ours.reduced_grads():
        want = oracle[name].grad.reshape(-1)[where]
        assert_close(got, want, tol, f"step {step} rank {ctx.rank} grad of {name}")
        compared += got.numel()
    return compared


def first_step_grads_against_torch_ddp(ctx, impl, case: Case) -> int:
    """The grad sync alone (ddp level, no optimizer): one step's reduced grads against torch DDP's."""
    ours, theirs = UnderTest(case, ctx, impl), TorchDDPOracle(case, ctx)
    total = global_token_count(case, 0, ctx.world_size)
    ours.sync(ours.backward(0, total))
    theirs.backward(0, total)
    compared = []
    agreed(ctx, lambda: compared.append(
        compare_grads(ctx, ours, theirs.params(), tolerance(case.bitwise(ctx.world_size), case.bf16), 0)))
    return compared[0]


def compare_step(ctx, case: Case, ours: UnderTest, theirs: TorchDDPOracle, tol, step: int,
                 zeros: int | None) -> None:
    """Losses, reduced grads and the zero count of one step, against torch DDP's."""
    their_params = theirs.params()
    if not case.num_tokens:  # (torch's side rescales its loss for num_tokens)
        for micro, (got, want) in enumerate(zip(ours.losses, theirs.losses)):
            assert_close(got, want, tol, f"step {step} rank {ctx.rank} microbatch {micro} loss")
    compare_grads(ctx, ours, their_params, tol, step)
    if zeros is not None:
        want = sum(int((p.grad == 0).sum()) for p in their_params.values())
        assert zeros == want, f"step {step} zero grad elements: got {zeros}, but should be {want}"


def compare_norm(case: Case, step: int, norm: float | None, their_norm: float | None, oracle: str) -> None:
    """The grad norm, taken when clipping or skipping by it, against the oracle's."""
    if case.clip is None and case.skip_above is None:
        return
    assert norm is not None and abs(norm - their_norm) <= 1e-5 * their_norm, (
        f"step {step} grad norm: got {norm}, but should be {their_norm} ({oracle})"
    )


def compare_update(ctx, case: Case, ours: dict, theirs: TorchDDPOracle, tol, step: int, norms,
                   forwards: list[Forward]) -> None:
    """The clip norm, the forwards between steps and every param (``ours``: ``Side.params()``)."""
    norm, their_norm = norms
    if case.clip is not None:  # the case must exercise the side of the decision it is named for
        side = "exceed" if case.clip_reached else "stay below"
        assert norm is not None and (norm > case.clip) == case.clip_reached, (
            f"step {step} grad norm: got {norm}, but should {side} max_norm {case.clip} for this case"
        )
    compare_norm(case, step, norm, their_norm, "torch clip_grad_norm_")
    compare_forwards(ctx, forwards, theirs.model, tol, step, "")
    their_params = theirs.params()
    for name, param in ours.items():
        assert_close(param, their_params[name], tol, f"step {step} rank {ctx.rank} param {name}")


def train_against_torch_ddp(ctx, impl, case: Case) -> int:
    """Train both sides ``case.steps`` steps; every comparison agreed across ranks; returns the steps compared."""
    ours, theirs = UnderTest(case, ctx, impl), TorchDDPOracle(case, ctx)
    tol = tolerance(case.bitwise(ctx.world_size), case.bf16)
    for step in range(case.steps):
        total = global_token_count(case, step, ctx.world_size)
        ours.sync(ours.backward(step, total))
        theirs.backward(step, total)
        # bf16 grads underflow to zero where fp32 ones do not; counting is itself a collective.
        zeros = ours.opt.count_zeros() if ours.full_step and not case.bf16 else None
        agreed(ctx, lambda: compare_step(ctx, case, ours, theirs, tol, step, zeros))
        norms = ours.step(), theirs.step()
        forwards = ours.finish_step(step)
        params = ours.params()
        agreed(ctx, lambda: compare_update(ctx, case, params, theirs, tol, step, norms, forwards))
        theirs.zero_grad()
    return case.steps


def train_against_single_process(ctx, impl, case: Case) -> int:
    """torch's own DDP test pattern, one concern per check: a model trained on every rank's data at once.

    Each step starts the oracle from the implementation's params and checks
    the reduced grads every rank holds against the oracle's (within the bound
    the arithmetic allows, ``bounds.Arithmetic``), that they make up every
    param once and agree where ranks hold the same elements, the zero count
    and the grad norm against those grads and against the oracle's, that the
    case meets the side of the clip and skip decisions it is named for, and
    every param after the update the oracle takes from the same grads and
    norm. Returns the steps compared.
    """
    in_dtype = isinstance(impl, StepsInParamDtype) and impl.steps_in_param_dtype
    ours = UnderTest(case, ctx, impl)
    oracles = [GlobalBatch(case, ctx, in_dtype, from_init) for from_init in master_seedings(impl, case)]
    arithmetic = Arithmetic.of(case, ctx.world_size, in_dtype)
    numels = {name: p.numel() for name, p in oracles[0].params.items()}
    unstopped: UnderTest | None = None
    for step in range(case.steps):
        total = global_token_count(case, step, ctx.world_size)
        ours.sync(ours.backward(step, total))
        computing = ours.ddp.computing if isinstance(ours.ddp, ComputesWith) else contextlib.nullcontext
        want = oracles[0].gradient(step, total, computing)
        bounds = {name: arithmetic.grad_bound(m) for name, m in want.magnitude.items()}
        held, problems = whole_reduced_grads(ctx, ours, numels)
        zeros = ours.opt.count_zeros() if ours.full_step else None
        agreed(ctx, lambda: check_reduced(ctx, ours, want, bounds, held, problems, zeros, step))
        norm = ours.step()
        if unstopped is not None:  # the run that never stopped takes the same step
            unstopped.sync(unstopped.backward(step, total))
            unstopped.step()
        elif case.moment == "checkpoint" and step == 0:
            unstopped, ours = ours, ours.resumed()
        befores = [oracle.update(held, norm) for oracle in oracles]
        forwards = ours.finish_step(step)
        params = ours.params()
        agreed(ctx, lambda: check_update(ctx, case, arithmetic, norm, held, want, bounds, step))
        kept = agreed_candidates(ctx, [
            lambda oracle=oracle, before=before: check_params(ctx, case, arithmetic, params, oracle, before, forwards,
                                                              step, computing)
            for oracle, before in zip(oracles, befores)])
        oracles = [oracles[i] for i in kept]
        if unstopped is not None:
            unstopped.finish_step(step)
            theirs = unstopped.params()
            agreed(ctx, lambda: compare_resumed(ctx, case, params, theirs, step))
        everyone = everyones_params(ctx, params)
        for oracle in oracles:
            oracle.follow(everyone)
    return case.steps


def master_seedings(impl, case: Case) -> list[bool]:
    """Where the oracle may seed quantized params' masters, as ``from_init`` flags: from the value kept at
    initialization where the case's model keeps one and the implementation says it seeds from it
    (``SeedsMasters``), from the dequantized values where it says so or the model keeps none; either, checked
    against both, where it says nothing (a choice is never failed)."""
    if case.quantized is None or case.seeding != "high-precision":
        return [False]
    said = impl.master_seeding if isinstance(impl, SeedsMasters) else None
    return [False, True] if said is None else [said == "high-precision-init"]


def compare_resumed(ctx, case: Case, params: dict[str, torch.Tensor], unstopped: dict[str, torch.Tensor],
                    step: int) -> None:
    """The run resumed from a checkpoint against the run that never stopped: the same bits where the order of a
    reduction cannot change its sum (``Case.bitwise``: two ranks, fp32), else within the rounding tolerance (torch
    DDP rebuilds its buckets after its first iteration, so a resumed run's first step groups its sums otherwise)."""
    tol = tolerance(case.bitwise(ctx.world_size), case.bf16)
    for name, param in params.items():
        assert_close(param, unstopped[name], tol, f"step {step} rank {ctx.rank} param {name} of the run resumed from "
                     "the checkpoint, against the run that never stopped")


def everyones_params(ctx, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every param of the model from the ranks holding it (experts live on some ranks only), gathered over the
    control group; a param several ranks hold is taken from the first (the checks found them equal)."""
    everyone: list = [None] * ctx.world_size
    mine = {name: p.detach().cpu().clone() for name, p in params.items()}
    torch.distributed.all_gather_object(everyone, mine, group=ctx.control_group)
    merged: dict[str, torch.Tensor] = {}
    for theirs in everyone:
        for name, p in theirs.items():
            merged.setdefault(name, p.to(ctx.device))
    return merged


def whole_reduced_grads(ctx, ours: UnderTest, numels: dict[str, int]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Every param's reduced grad put together from the elements each rank holds (gathered over the control
    group, the same on every rank), and what is wrong with them: elements no rank holds, elements two ranks hold
    differently (replicas of a reduction hold the same bits)."""
    mine = [(name, where.start, got.detach().float().cpu().reshape(-1).clone()) for name, got, where in ours.reduced_grads()]
    everyone: list = [None] * ctx.world_size
    torch.distributed.all_gather_object(everyone, mine, group=ctx.control_group)
    whole = {name: torch.zeros(numel) for name, numel in numels.items()}
    filled = {name: torch.zeros(numel, dtype=torch.bool) for name, numel in numels.items()}
    problems = []
    for rank, pieces in enumerate(everyone):
        for name, start, values in pieces:
            where = slice(start, start + values.numel())
            seen = filled[name][where]
            before = whole[name][where][seen]
            if seen.any() and not torch.equal(before, values[seen]):
                problems.append(f"rank {rank} holds {int((before != values[seen]).sum())} elements of {name}'s reduced "
                                "grad differently from a rank before it, but replicas of a reduction should hold the "
                                "same values")
            whole[name][where] = values
            filled[name][where] = True
    problems += [f"{int((~h).sum())} of {h.numel()} elements of {name}'s reduced grad: held by no rank, but should be "
                 "by at least one" for name, h in filled.items() if not h.all()]
    return whole, problems


def check_reduced(ctx, ours: UnderTest, want: Gradient, bounds, held, problems, zeros: int | None, step: int) -> None:
    """The grads this rank holds against the oracle's, the grads put together, and the zero count against both."""
    assert not problems, f"step {step} reduced grads over the ranks:\n  " + "\n  ".join(problems)
    for name, got, where in ours.reduced_grads():
        assert_within(got, want.grads[name][where], bounds[name][where], f"step {step} rank {ctx.rank} grad of {name}")
    if zeros is None:
        return
    own = sum(int((g == 0).sum()) for g in held.values())
    assert zeros == own, (f"step {step} zero grad elements: got {zeros}, but should be {own}, the zeros of the reduced "
                          "grads the ranks hold (each element once)")
    certain = sum(int((m == 0).sum()) for m in want.magnitude.values())
    unsure = sum(int(((m > 0) & (want.grads[n].abs() <= bounds[n])).sum()) for n, m in want.magnitude.items())
    assert certain <= zeros <= certain + unsure, (
        f"step {step} zero grad elements: got {zeros}, but should be {certain} (every added grad zero) plus at most "
        f"{unsure} (within the rounding bound of zero) (single process)")


def check_update(ctx, case: Case, arithmetic: Arithmetic, norm: float | None, held, want: Gradient, bounds,
                 step: int) -> None:
    """The grad norm against the grads put together and the oracle's; the case on the side of each decision."""
    if case.clip is None and case.skip_above is None:
        return
    assert norm is not None, f"step {step} grad norm: got None, but should be the norm (clipping or skipping by it)"
    p, numel = case.norm_type, sum(g.numel() for g in held.values())
    own, theirs = _norm(held.values(), p), _norm(want.grads.values(), p)
    rounding = arithmetic.norm_rounding(numel, len(held))
    assert abs(norm - own) <= rounding * own, (
        f"step {step} grad norm: got {norm}, but should be {own} (the norm of the reduced grads the ranks hold, each "
        f"element once) within {rounding:.2g} of it")
    apart = _norm(bounds.values(), p)
    slack = apart + rounding * (theirs + apart)  # the grads may lie ``apart`` from the oracle's, then round
    assert abs(norm - theirs) <= slack, (
        f"step {step} grad norm: got {norm}, but should be {theirs} within {slack:.3g} (single process)")
    sides = [(name, value, reached) for name, value, reached in (
        ("max_norm", case.clip, case.clip_reached), ("the skip threshold", case.skip_above, case.skip_reached))
        if value is not None]
    for name, value, above in sides:
        side = "exceed" if above else "stay below"
        assert (theirs - slack > value) if above else (theirs + slack < value), (
            f"step {step} grad norm: got {theirs} (single process), but should clearly {side} {name} {value} for this "
            "case to exercise that side of the decision")


def _norm(tensors, p: float) -> float:
    flat = torch.cat([t.double().reshape(-1) for t in tensors])
    return float(flat.abs().max()) if math.isinf(p) else float(flat.norm(p))


def check_params(ctx, case: Case, arithmetic: Arithmetic, params: dict, oracle: GlobalBatch, before: dict,
                 forwards: list[Forward], step: int, computing=contextlib.nullcontext) -> None:
    """Every param after the step against the oracle's update from the same start, grads and norm; with overlapped
    gathers, the forward after the step against the oracle's."""
    for name, param in params.items():
        want = oracle.params[name]
        bound = arithmetic.param_bound(before[name], oracle.masters[name])
        if oracle.quantizes(name):  # the master's bound, carried through the quantizer, then one rounding to bf16
            low, high = oracle.held_range(oracle.masters[name], bound)
            low, high = low.double(), high.double()
            want = (low + high) / 2
            bound = (high - low) / 2 + 2 * UNIT_ROUNDOFF[param.dtype] * torch.maximum(low.abs(), high.abs())
        assert_within(param, want, bound.reshape(want.shape), f"step {step} rank {ctx.rank} param {name} (vs single "
                      "process, from the same params, grads and norm)")
    compare_forwards(ctx, forwards, holding(oracle.model, params), tolerance(False, case.bf16), step,
                     " (vs single process, with the params the ranks hold)", computing)


def holding(model: torch.nn.Module, params: dict[str, torch.Tensor]) -> torch.nn.Module:
    """A copy of ``model`` with ``params`` (by name) in place of its own. The params were just checked against the
    oracle's within their bounds; a forward computed from them is the one to compare with, as a bf16 param one
    rounding apart moves a logit by more than a fixed tolerance. A forward that read stale params still differs."""
    held = copy.deepcopy(model)
    with torch.no_grad():
        for name, param in held.named_parameters():
            if name in params:
                param.copy_(params[name])
    return held


def compare_forwards(ctx, forwards: list[Forward], model: torch.nn.Module, tol, step: int, against: str,
                     computing=contextlib.nullcontext) -> None:
    """Each forward run between steps against ``model``'s on the same tokens, computed within ``computing()`` (as
    the oracle's gradient): it must have computed with the updated params (waited for their gather, read them in
    the dtype they are held in)."""
    for forward in forwards:
        with torch.no_grad(), computing():
            want = model(forward.tokens.to(ctx.device))
        assert_close(forward.logits, want, tol, f"step {step} rank {ctx.rank} logits of {forward.what}{against}")


def train_two_configs(ctx, impl, first: Case, second: Case, bitwise: bool) -> None:
    """Two configurations of the implementation under test must train the same model."""
    a, b = UnderTest(first, ctx, impl), UnderTest(second, ctx, impl)
    tol = tolerance(bitwise, first.bf16)
    for step in range(first.steps):
        total = global_token_count(first, step, ctx.world_size)
        for side in (a, b):
            side.sync(side.backward(step, total))
            side.step()
            side.finish_step(step)
        first_params, second_params = a.params(), b.params()
        agreed(ctx, lambda: [
            assert_close(second_params[name], param, tol,
                         f"step {step} rank {ctx.rank} param {name}: {second.name} vs {first.name}")
            for name, param in first_params.items()
        ])
