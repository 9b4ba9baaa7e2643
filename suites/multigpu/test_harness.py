"""The harness itself, run inside the suite: ranks talk to each other and report back by rank."""

import torch
import torch.distributed as dist

from suites.multigpu.harness import RankContext, requires_peers


def check_all_reduce_of_rank_ids(ctx: RankContext, scale: int) -> None:
    t = torch.tensor([float(ctx.rank * scale)], device=ctx.device)
    dist.all_reduce(t, group=ctx.group)
    expected = scale * ctx.world_size * (ctx.world_size - 1) / 2
    assert t.item() == expected, f"rank {ctx.rank}: got sum {t.item()}, but should be {expected}"


def test_all_reduce_of_rank_ids_is_their_sum(ranks):
    ranks.run(check_all_reduce_of_rank_ids, 3)


def check_rank_and_backend(ctx: RankContext) -> tuple[int, int, str, str]:
    return ctx.rank, ctx.world_size, ctx.backend, ctx.device.type


def test_run_returns_each_ranks_value_in_rank_order(ranks):
    got = ranks.run(check_rank_and_backend)
    expected = [(rank, ranks.world_size, ranks.backend, ranks.tensors) for rank in range(ranks.world_size)]
    assert got == expected, f"got {got}, but should be {expected}"


def check_ring_exchange(ctx: RankContext) -> None:
    requires_peers(ctx)
    # gloo's send and recv read host memory only: a CUDA tensor's address reaches writev ("Bad address").
    device = torch.device("cpu") if ctx.backend == "gloo" else ctx.device
    send = torch.tensor([float(ctx.rank)], device=device)
    recv = torch.empty_like(send)
    right, left = (ctx.rank + 1) % ctx.world_size, (ctx.rank - 1) % ctx.world_size
    ops = [dist.P2POp(dist.isend, send, right, ctx.group), dist.P2POp(dist.irecv, recv, left, ctx.group)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert recv.item() == left, f"rank {ctx.rank}: got {recv.item()} from the left, but should be {left}"


def test_ring_exchange_needs_peers(ranks):
    ranks.run(check_ring_exchange)


def check_control_group_is_separate_gloo(ctx: RankContext) -> tuple[str, float]:
    assert ctx.control_group is not ctx.group, (
        "got the group under test as the control group, but should be separate"
    )
    assert dist.get_backend(ctx.control_group) == "gloo", (
        f"got control group backend {dist.get_backend(ctx.control_group)}, but should be gloo"
    )
    return ctx.impl_spec, ctx.timeout.total_seconds()


def test_control_group_is_separate_and_options_reach_every_rank(ranks, pytestconfig):
    got = ranks.run(check_control_group_is_separate_gloo)
    options = (pytestconfig.getoption("impl"), pytestconfig.getoption("pg_timeout"))
    assert got == [options] * ranks.world_size, (
        f"got (impl, timeout) {got}, but should be {options} on every rank"
    )
