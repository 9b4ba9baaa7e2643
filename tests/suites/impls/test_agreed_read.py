"""Reads whose every read is a collective: a rank-local error fails every rank at once, never a hang."""

import time

import pytest
import torch
import torch.distributed as dist

from suites.impls.agreed_read import read_on_every_rank
from suites.multigpu.harness import requires_peers

FAST = 10.0  # seconds: well inside the process-group timeout


def summed(value: float):
    """A read that is a collective, as DeepSpeed's safe_get_full_grad is: an all-reduce of this rank's part."""
    def read():
        t = torch.tensor([value])
        dist.all_reduce(t)
        return t
    return read


def failing():
    raise RuntimeError("The size of tensor a (12) must match the size of tensor b (24)")


def check_reads_agree(ctx) -> list[float]:
    reads = [("a", summed(1.0)), ("b", summed(float(ctx.rank)))]
    return [float(t) for t in read_on_every_rank(reads, ctx.control_group)]


def check_error_on_one_rank_fails_every_rank_fast(ctx) -> str:
    requires_peers(ctx)
    last = ctx.world_size - 1
    reads = [("a", summed(1.0)), ("b", failing if ctx.rank == last else summed(2.0))]
    start = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        read_on_every_rank(reads, ctx.control_group)
    took = time.monotonic() - start
    assert took < FAST, f"time to fail: got {took:.1f}s, but should be under {FAST}s"
    return str(info.value)


def check_different_collectives_fail_every_rank(ctx) -> str:
    requires_peers(ctx)
    reads = [("a", summed(1.0) if ctx.rank == 0 else (lambda: torch.zeros(1)))]
    with pytest.raises(RuntimeError) as info:
        read_on_every_rank(reads, ctx.control_group)
    return str(info.value)


def test_reads_return_every_value_on_every_rank(ranks):
    got = ranks.run(check_reads_agree)
    want = [float(ranks.world_size), float(sum(range(ranks.world_size)))]
    assert got == [want] * ranks.world_size, f"got {got}, but should be {want} on every rank"


def test_an_error_on_one_rank_fails_every_rank_fast(ranks):
    messages = ranks.run(check_error_on_one_rank_fails_every_rank_fast)
    last = ranks.world_size - 1
    for message in messages:
        assert f"on rank {last}, reading 'b' raised RuntimeError: The size of tensor a" in message, message


def test_ranks_about_to_issue_different_collectives_fail_every_rank(ranks):
    messages = ranks.run(check_different_collectives_fail_every_rank)
    for message in messages:
        assert "reading 'a' issues different collectives on rank 0 and rank 1" in message, message
