"""Joining the process group the same way in both launch modes.

nccl only where every local rank gets its own GPU, gloo otherwise; a short
timeout, so a rank left alone in a collective fails instead of waiting gloo's
default 30 minutes, but only once every rank has arrived, so a slow start is
not mistaken for a hang; and a separate gloo control group for the checks'
bookkeeping on CPU, whatever the backend under test.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .context import RankContext
from .settings import Settings


def pick_backend(local_world_size: int) -> str:
    if (
        dist.is_nccl_available()
        and torch.cuda.is_available()
        and torch.cuda.device_count() >= local_world_size
    ):
        return "nccl"
    return "gloo"


def torchrun_store(settings: Settings, rank: int) -> dist.Store:
    """The store torchrun's environment points at (env://), as init_process_group would find it."""
    store, _, _ = next(
        dist.rendezvous("env://", rank, settings.world_size, timeout=settings.startup_timedelta)
    )
    return store


def join(settings: Settings, *, rank: int, local_rank: int, backend: str, store: dist.Store) -> RankContext:
    """Wait for every rank on ``store``, then initialise the default group and the control group."""
    store.set_timeout(settings.startup_timedelta)
    _arrive_together(store, settings.world_size)
    store.set_timeout(settings.pg_timedelta)
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(
        backend, store=store, rank=rank, world_size=settings.world_size, timeout=settings.pg_timedelta
    )
    control = dist.new_group(backend="gloo", timeout=settings.pg_timedelta)
    return RankContext(
        rank=rank,
        world_size=settings.world_size,
        backend=backend,
        device=device,
        group=dist.group.WORLD,
        control_group=control,
        impl_spec=settings.impl_spec,
        timeout=settings.pg_timedelta,
    )


def _arrive_together(store: dist.Store, world_size: int, key: str = "ddpc-harness/arrived") -> None:
    if store.add(key, 1) == world_size:
        store.set(f"{key}/all", "1")
    store.wait([f"{key}/all"])


def leave() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
