"""Multi-rank checks that go wrong on purpose: the harness must fail or skip them, never hang.

Not collected by the normal run (the name does not start with ``test_``);
tests/suites/multigpu/test_harness.py runs this file with
``-p suites.multigpu.harness.plugin`` and short timeouts. Tests run in file
order; the last one shows what is left after a collective timed out.
"""

import os
import signal
import time

import pytest
import torch
import torch.distributed as dist

from suites.multigpu.harness import RankContext, requires_peers


def check_needs_peers(ctx: RankContext) -> None:
    requires_peers(ctx)


@pytest.mark.world_size(1)
def test_at_world_size_1_peers_are_missing(ranks):
    ranks.run(check_needs_peers)


def check_fails_on_rank_1(ctx: RankContext) -> None:
    assert ctx.rank != 1, f"got rank {ctx.rank}, which fails on purpose"


def test_fails_on_rank_1(ranks):
    ranks.run(check_fails_on_rank_1)


def check_skips_on_rank_1(ctx: RankContext) -> None:
    if ctx.rank == 1:
        pytest.skip("rank 1 skips on purpose")


def test_skips_on_rank_1(ranks):
    ranks.run(check_skips_on_rank_1)


def check_all_reduce_of_ones(ctx: RankContext) -> float:
    t = torch.ones(1, device=ctx.device)
    dist.all_reduce(t, group=ctx.group)
    return t.item()


def test_passes_after_a_failure(ranks):
    got = ranks.run(check_all_reduce_of_ones)
    assert got == [float(ranks.world_size)] * ranks.world_size, f"got {got}"


def check_dies_on_rank_1(ctx: RankContext) -> None:
    if ctx.rank == 1:
        os._exit(3)


def test_dies_on_rank_1(ranks):
    ranks.run(check_dies_on_rank_1)


def check_dies_of_a_signal_on_rank_1(ctx: RankContext) -> None:
    """As a rank dies whose heap glibc finds corrupt: SIGABRT."""
    if ctx.rank == 1:
        os.abort()


def test_dies_of_a_signal_on_rank_1(ranks):
    ranks.run(check_dies_of_a_signal_on_rank_1)


def check_dies_of_a_signal_once_on_rank_1(ctx: RankContext, marker: str) -> None:
    """As a rank dies of a crash that comes and goes: SIGSEGV the first time only (``marker`` remembers it)."""
    if ctx.rank == 1 and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGSEGV)


def test_dies_of_a_signal_once_on_rank_1(ranks, tmp_path):
    ranks.run(check_dies_of_a_signal_once_on_rank_1, str(tmp_path / "crashed"))


def check_hangs_on_rank_0(ctx: RankContext, seconds: float) -> None:
    if ctx.rank == 0:
        time.sleep(seconds)


def test_hangs_on_rank_0(ranks, pytestconfig):
    ranks.run(check_hangs_on_rank_0, 10 * pytestconfig.getoption("rank_timeout"))


def check_hangs_on_rank_0_after_rank_1_fails(ctx: RankContext, seconds: float) -> None:
    if ctx.rank == 0:
        time.sleep(seconds)
    raise ValueError("rank 1 fails on purpose while rank 0 sleeps")


def test_hangs_on_rank_0_after_rank_1_fails(ranks, pytestconfig):
    ranks.run(check_hangs_on_rank_0_after_rank_1_fails, 10 * pytestconfig.getoption("rank_timeout"))


def check_rank_1_raises_before_a_collective(ctx: RankContext) -> None:
    if ctx.rank == 1:
        raise ValueError("rank 1 raises before the collective on purpose")
    dist.all_reduce(torch.ones(1, device=ctx.device), group=ctx.group)


def test_rank_1_raises_before_a_collective(ranks):
    ranks.run(check_rank_1_raises_before_a_collective)


def test_after_the_timeout(ranks):
    ranks.run(check_all_reduce_of_ones)
