"""Misuse fails fast with a clear error on every rank, never a hang."""

import dataclasses
import time

import pytest

from reference.process_groups import new_group
from suites.impls import load_implementation
from suites.multigpu.harness import requires_peers

from .cases import Case
from .models import batch, loss_fn, make_model

pytestmark = pytest.mark.requires("ddp", "validation")

FAST = 30.0  # seconds: well inside the process-group timeout


def _wrapped(ctx, case: Case, **model_kw):
    impl = load_implementation(ctx.impl_spec)
    model = make_model(**model_kw).to(ctx.device)
    ddp = impl.wrap(model, case.ddp_config(), ctx.group, ctx.control_group)
    return impl, model, ddp


def _backward(ctx, ddp, micro: int = 0) -> None:
    tokens, labels = (t.to(ctx.device) for t in batch(1, 0, micro, ctx.rank))
    loss_fn(ddp(tokens), labels).backward()


def _expect_error(action, *needles: str) -> str:
    start = time.monotonic()
    with pytest.raises(Exception) as info:
        action()
    took = time.monotonic() - start
    message = str(info.value)
    for needle in needles:
        assert needle in message, f"error message: got {message!r}, but should mention {needle!r}"
    assert took < FAST, f"time to fail: got {took:.1f}s, but should be under {FAST}s"
    return message


def check_param_without_grad_is_named(ctx, overlap: bool) -> None:
    _, _, ddp = _wrapped(ctx, Case("unused", overlap=overlap), unused_layer=True)
    _backward(ctx, ddp)
    _expect_error(ddp.finish_grad_sync, "'unused.weight'", "'unused.bias'", "no gradient")


def check_missing_grad_on_one_rank_fails_everywhere(ctx) -> None:
    requires_peers(ctx)
    last = ctx.world_size - 1
    _, model, ddp = _wrapped(ctx, Case("one-rank-unused", overlap=False))
    model.skip_fc = ctx.rank == last
    _backward(ctx, ddp)
    _expect_error(ddp.finish_grad_sync, "'fc1.weight'", f"on rank {last}")


def check_grad_registered_twice(ctx) -> None:
    _, _, ddp = _wrapped(ctx, Case("twice", overlap=False))
    _backward(ctx, ddp, 0)
    _expect_error(lambda: _backward(ctx, ddp, 1), "registered twice")


def check_step_before_finish(ctx) -> None:
    case = Case("early-step", overlap=False)
    impl, _, ddp = _wrapped(ctx, case)
    opt = impl.make_optimizer(ddp, case.make_torch_optimizer)
    _backward(ctx, ddp)
    _expect_error(opt.step, "before gradients are finished")
    ddp.finish_grad_sync()  # leave the group clean for the next test


def check_config_must_match_across_ranks(ctx) -> None:
    requires_peers(ctx)
    case = Case("differs", bucket_size=100 if ctx.rank == 0 else 200)
    _expect_error(lambda: _wrapped(ctx, case), "bucket_size", "rank 1 has 200, rank 0 has 100")


def check_expert_group_outside_the_dp_group(ctx) -> None:
    """dp groups {0, 1} and {2, 3}, expert groups {0, 2} and {1, 3}: sizes divide, membership does not."""
    impl = load_implementation(ctx.impl_spec)
    dense = [new_group(r) for r in ([0, 1], [2, 3])][ctx.rank // 2]
    expert = [new_group(r) for r in ([0, 2], [1, 3])][ctx.rank % 2]
    model = make_model().to(ctx.device)
    config = Case("outside").ddp_config()
    _expect_error(lambda: impl.wrap(model, config, dense, ctx.control_group, expert_group=expert),
                  "expert_data_parallel_group", "subgroup")


def check_nan_is_traced_to_param_bucket_rank(ctx, case: Case) -> None:
    requires_peers(ctx)
    last = ctx.world_size - 1
    impl = load_implementation(ctx.impl_spec)
    model = make_model().to(ctx.device)
    config = dataclasses.replace(case.ddp_config(), check_for_nan_in_grad=True)
    ddp = impl.wrap(model, config, ctx.group, ctx.control_group)
    tokens, labels = (t.to(ctx.device) for t in batch(1, 0, 0, ctx.rank))
    loss = loss_fn(ddp(tokens), labels)
    (loss * float("nan") if ctx.rank == last else loss).backward()
    _expect_error(ddp.finish_grad_sync, "NaN in the gradient of 'head.weight'", "(bucket ", f"on rank {last}")


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "serial"])
def test_param_without_grad_is_named(ranks, impl, overlap):
    ranks.run(check_param_without_grad_is_named, overlap)


def test_missing_grad_on_one_rank_fails_everywhere(ranks, impl):
    ranks.run(check_missing_grad_on_one_rank_fails_everywhere)


def test_grad_registered_twice(ranks, impl):
    ranks.run(check_grad_registered_twice)


def test_step_before_finish(ranks, impl):
    ranks.run(check_step_before_finish)


def test_config_must_match_across_ranks(ranks, impl):
    ranks.run(check_config_must_match_across_ranks)


@pytest.mark.world_size(4)
@pytest.mark.requires("expert")
def test_expert_group_outside_the_dp_group(ranks, impl):
    ranks.run(check_expert_group_outside_the_dp_group)


NAN_CASES = [Case(mode, policy, grad_sync_only=True) for mode, policy in (("allreduce", "packed"), ("distopt", "padded"))]


@pytest.mark.parametrize("case", NAN_CASES, ids=[c.name for c in NAN_CASES])
def test_nan_is_traced_to_param_bucket_rank(ranks, impl, case):
    ranks.run(check_nan_is_traced_to_param_bucket_rank, case)
