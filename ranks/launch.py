"""Running a function on every rank outside pytest: the benchmarks' way into the same harness.

Under torchrun this process is one rank: it joins the default group once
(through torchrun's store, as the suites do) and runs the function in place;
the values are gathered to every rank. Otherwise ``world_size`` ranks are
spawned in a ``WorkerPool`` (the suites' plain-mode pool: FileStore
rendezvous, a timeout per task, a dead rank reported), the function runs
once on each, and the pool is closed. A failure on any rank raises here with
every failing rank's traceback.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import torch.distributed as dist

from .address import address_of
from .context import RankContext
from .joining import join, leave, pick_backend, torchrun_store
from .outcome import Outcome, call_check
from .pool import PoolError, WorkerPool
from .startup import Settings, launched_by_torchrun
from .worker import Task

_torchrun_ctx: RankContext | None = None


class RanksFailed(RuntimeError):
    """A function failed on one or more ranks; the message holds each failing rank's traceback, ``failed`` each
    failing rank's outcome (none where the ranks could not start)."""

    def __init__(self, message: str, failed: Sequence[Outcome] = ()) -> None:
        super().__init__(message)
        self.failed = tuple(failed)


def torchrun_context(pg_timeout: float = 300.0, device: str = "auto") -> RankContext:
    """This process's rank under torchrun, joining the group on first use."""
    global _torchrun_ctx
    if _torchrun_ctx is None:
        world_size = int(os.environ["WORLD_SIZE"])
        settings = Settings("torchrun", world_size, pg_timeout, 2 * pg_timeout, os.environ.get("DDPC_IMPL", ""),
                            device=device)
        backend = pick_backend(int(os.environ.get("LOCAL_WORLD_SIZE", world_size)), device)
        rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
        _torchrun_ctx = join(settings, rank=rank, local_rank=local_rank, backend=backend,
                             store=torchrun_store(settings, rank))
    return _torchrun_ctx


def leave_torchrun() -> None:
    """Leave the torchrun group (NCCL communicators and all), so this process can go on alone."""
    global _torchrun_ctx
    leave()
    _torchrun_ctx = None


def run_on_ranks(fn: Callable[..., Any], world_size: int, *args: Any, timeout: float = 1800.0,
                 pg_timeout: float = 300.0, threads: int | None = None, device: str = "auto") -> list[Any]:
    """``fn(ctx, *args)`` on every rank; its return values by rank.

    ``timeout`` bounds the whole call on each spawned rank, ``pg_timeout`` each
    collective; ``threads`` is torch's intra-op threads per spawned rank
    (default: the cores shared out among the ranks).
    """
    if launched_by_torchrun():
        ctx = torchrun_context(pg_timeout, device)
        outcome = call_check(fn, ctx, args, {})
        everyone: list[Any] = [None] * ctx.world_size
        dist.all_gather_object(everyone, outcome, group=ctx.control_group)
        return _values(everyone)
    threads = threads or max(1, (os.cpu_count() or 1) // world_size)
    settings = Settings("plain", world_size, pg_timeout, timeout, "", threads=threads, device=device)
    pool = WorkerPool(settings, pick_backend(world_size, device))
    try:
        pool.start(frozenset())
        return _values(pool.run(Task(address_of(fn), args, {}, frozenset()), str(address_of(fn))))
    except PoolError as exc:
        raise RanksFailed(str(exc)) from exc
    finally:
        pool.close()


def _values(outcomes) -> list[Any]:
    failed = [o for o in outcomes if o.kind != "passed"]
    if failed:
        raise RanksFailed("\n".join(f"---------- rank {o.rank}: {o.kind} ----------\n{o.detail.rstrip()}"
                                    for o in failed), failed)
    return [o.value for o in sorted(outcomes, key=lambda o: o.rank)]
