"""A multi-process test harness: write a per-rank check once, run it on every rank.

A check is a module-level function ``check(ctx: RankContext, *args)``; a test
runs it with the ``ranks`` fixture::

    def check_sum(ctx: RankContext, scale: int) -> None:
        requires_peers(ctx)
        t = torch.tensor([float(ctx.rank)])
        torch.distributed.all_reduce(t, group=ctx.group)
        assert t.item() == ..., ...

    def test_sum(ranks):
        ranks.run(check_sum, 3)

Under ``torchrun --nproc-per-node=N -m pytest suites/multigpu`` every rank runs
the session and the check runs in-process; under plain ``pytest`` the parent
runs it in a pool of ``--world-size`` spawned ranks (see ``plugin``).
"""

from ranks.context import RankContext, requires_peers

from .fixture import Ranks

__all__ = ["RankContext", "Ranks", "requires_peers"]
