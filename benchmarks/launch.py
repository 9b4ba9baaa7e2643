"""Run a per-rank benchmark function on every rank: spawned here, or in place under torchrun.

Benchmarks are module-level functions ``fn(ctx, *args)``. Under torchrun the
calling process is already one rank, so the function runs in place and the
results are gathered; otherwise ``world_size`` ranks are spawned with a
FileStore rendezvous. Either way the caller gets every rank's return value.
NCCL is used when every rank has a GPU, gloo otherwise.
"""

from __future__ import annotations

import datetime
import os
import pickle
import tempfile
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from suites.multigpu.harness.groups import pick_backend
from suites.multigpu.harness.settings import launched_by_torchrun

TIMEOUT = datetime.timedelta(minutes=10)


@dataclass(frozen=True)
class BenchContext:
    rank: int
    world_size: int
    backend: str
    device: torch.device
    group: dist.ProcessGroup

    def sync(self) -> None:
        """Wait for queued device work, so a timer measures the collective, not its launch."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


under_torchrun = launched_by_torchrun  # the same rule as the test harness


def _context(rank: int, world_size: int, local_rank: int, backend: str) -> BenchContext:
    device = torch.device(f"cuda:{local_rank}") if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    return BenchContext(rank, world_size, backend, device, dist.group.WORLD)


def torchrun_context() -> BenchContext:
    """This process's context under torchrun, initialising the default group once."""
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    backend = pick_backend(local_world)
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=TIMEOUT)
    return _context(dist.get_rank(), dist.get_world_size(), int(os.environ["LOCAL_RANK"]), backend)


def _spawned(rank: int, fn, world_size: int, backend: str, store: str, out: str, args: tuple) -> None:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world_size,
                            timeout=TIMEOUT)
    try:
        result = fn(_context(rank, world_size, rank, backend), *args)
        with open(os.path.join(out, f"rank{rank}.pkl"), "wb") as fh:
            pickle.dump(result, fh)
    finally:
        dist.destroy_process_group()


def run_on_ranks(fn: Callable[..., Any], world_size: int, *args: Any) -> list[Any]:
    """``fn(ctx, *args)`` on every rank; returns the results by rank."""
    if under_torchrun():
        ctx = torchrun_context()
        results: list[Any] = [None] * ctx.world_size
        dist.all_gather_object(results, fn(ctx, *args))
        return results
    backend = pick_backend(world_size)
    with tempfile.TemporaryDirectory(prefix="ddpc-bench-") as tmp:
        store = os.path.join(tmp, "store")
        mp.start_processes(_spawned, args=(fn, world_size, backend, store, tmp, args), nprocs=world_size,
                           start_method="spawn")
        results = []
        for rank in range(world_size):
            with open(os.path.join(tmp, f"rank{rank}.pkl"), "rb") as fh:
                results.append(pickle.load(fh))
    return results
