"""Gradient accumulation: inside ``no_sync`` nothing is reduced or scaled; the last microbatch syncs."""

import pytest
import torch
import torch.distributed as dist

from suites.impls import load_implementation
from suites.multigpu.harness import requires_peers

from .cases import Case
from .bounds import assert_close
from .observe import requires_observed, watching
from .models import batch, loss_fn, make_model
from .sides import UnderTest, owned_grad_pairs, requires_accumulation

pytestmark = pytest.mark.requires("ddp")


def check_no_sync_stays_local(ctx, case: Case) -> None:
    requires_peers(ctx)
    impl = load_implementation(ctx.impl_spec)
    model, plain = make_model().to(ctx.device), make_model().to(ctx.device)
    ddp = impl.wrap(model, case.ddp_config(), ctx.group, ctx.control_group)
    requires_accumulation(ddp)
    tokens, labels = (t.to(ctx.device) for t in batch(case.seed, 0, 0, ctx.rank))
    with ddp.no_sync():
        loss_fn(ddp(tokens), labels).backward()
    loss_fn(plain(tokens), labels).backward()
    for name, param in model.named_parameters():
        # Unreduced and unscaled: exactly this rank's own gradient.
        assert_close(param.main_grad, dict(plain.named_parameters())[name].grad, None,
                     f"rank {ctx.rank} main_grad of {name} after a no_sync microbatch")
    mine = torch.cat([p.main_grad.reshape(-1) for p in model.parameters()]).cpu()
    everyone = [torch.empty_like(mine) for _ in range(ctx.world_size)]
    dist.all_gather(everyone, mine, group=ctx.control_group)
    assert not all(torch.equal(everyone[0], g) for g in everyone[1:]), (
        "accumulated grads inside no_sync: got identical on every rank, but should differ (rank-local data)"
    )
    tokens, labels = (t.to(ctx.device) for t in batch(case.seed, 0, 1, ctx.rank))
    loss_fn(ddp(tokens), labels).backward()
    ddp.finish_grad_sync()
    reduced = torch.cat([g.reshape(-1) for _, g, _ in owned_grad_pairs(ddp, ctx.rank)]).cpu()
    if case.policy == "packed":
        everyone = [torch.empty_like(reduced) for _ in range(ctx.world_size)]
        dist.all_gather(everyone, reduced, group=ctx.control_group)
        for rank, grads in enumerate(everyone):
            assert_close(grads, everyone[0], None, f"synced grads of rank {rank} vs rank 0")


def check_no_sync_launches_no_reduction(ctx, case: Case) -> None:
    requires_peers(ctx)  # one rank has nothing to exchange, so an implementation may launch nothing at all
    impl = load_implementation(ctx.impl_spec)
    side = UnderTest(case, ctx, impl)
    requires_accumulation(side.ddp)
    batches = [tuple(t.to(ctx.device) for t in batch(case.seed, 0, micro, ctx.rank)) for micro in range(case.microbatches)]
    with watching(side.model, side.recorders) as inside:
        for tokens, labels in batches[:-1]:
            with side.ddp.no_sync():
                loss_fn(side.ddp(tokens), labels).backward()
    reductions = inside.reductions()
    assert not reductions, (
        f"gradient reductions inside no_sync: got {len(reductions)} ({', '.join(c.kind for c in reductions)}), "
        "but should be none"
    )
    with watching(side.model, side.recorders) as last:
        loss_fn(side.ddp(batches[-1][0]), batches[-1][1]).backward()
        side.ddp.finish_grad_sync()
    requires_observed(last, impl)  # nothing through the group at all: the silence inside proved nothing


SYNCS = [Case(mode, policy, microbatches=2, grad_sync_only=True)
         for mode, policy in (("allreduce", "packed"), ("distopt", "padded"))]


@pytest.mark.parametrize("case", SYNCS, ids=[c.name for c in SYNCS])
def test_no_sync_keeps_grads_local(ranks, impl, case):
    ranks.run(check_no_sync_stays_local, case)


@pytest.mark.parametrize("case", SYNCS, ids=[c.name for c in SYNCS])
def test_no_sync_launches_no_reduction(ranks, impl, case):
    ranks.run(check_no_sync_launches_no_reduction, case)
