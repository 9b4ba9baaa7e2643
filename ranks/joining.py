"""Joining the process group the same way in both launch modes.

nccl only where every local rank gets its own GPU, gloo otherwise, agreed by
every rank of every node; a short timeout, so a rank left alone in a
collective fails instead of waiting gloo's default 30 minutes, but only once
every rank has arrived, so a slow start is not mistaken for a hang; and a
separate gloo control group for the checks' bookkeeping on CPU, whatever the
backend under test.

On nccl a collective that times out would otherwise make NCCL's watchdog
abort the whole process; with blocking wait it raises ``DistBackendError``
in the rank instead, which the harness reports as a broken group. Ranks that
fall back to gloo on a machine with GPUs are kept off them (they see none),
so an implementation under test cannot wander onto a device another rank uses,
unless the run asked for CUDA (``device="cuda"``): then gloo carries CUDA
tensors and the ranks share the node's GPUs, a setup of its own (``gloo`` on
``cuda``) that reaches the CUDA paths at world sizes a node's GPUs cannot
give NCCL.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from reference.process_groups import new_group

from .context import RankContext
from .startup import Settings

BLOCKING_WAIT = "TORCH_NCCL_BLOCKING_WAIT"
_visible_before_hiding: list[str | None] = []  # CUDA_VISIBLE_DEVICES as it was, once hidden


class BackendMismatch(RuntimeError):
    """Ranks (typically on different nodes) chose different backends."""


def pick_backend(local_world_size: int, device: str = "auto") -> str:
    """nccl when ``device`` allows CUDA and this node has a GPU for each of its ranks, else gloo (``DEVICES``).

    ``torch.cuda.device_count()`` asks NVML (honouring CUDA_VISIBLE_DEVICES)
    before CUDA is initialised, so choosing does not initialise CUDA and a
    gloo rank can still be kept off the GPUs.
    """
    gpus = torch.cuda.device_count() if device != "cpu" else 0
    if device == "cuda" and gpus == 0:
        raise ValueError("device: got cuda, but this node has no GPU that torch can see "
                         f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); use cpu or auto")
    if dist.is_nccl_available() and gpus >= local_world_size:
        return "nccl"
    return "gloo"


def tensors_on(backend: str, device: str) -> str:
    """``"cuda"`` or ``"cpu"``: where the ranks' tensors live under ``backend`` chosen for ``device``."""
    return "cuda" if backend == "nccl" or device == "cuda" else "cpu"


def tensors_of(backend: str | None) -> str:
    """Where a backend keeps its tensors unless told otherwise: CUDA under NCCL, the CPU under gloo (also what
    a run that did not record it had)."""
    return "cuda" if backend == "nccl" else "cpu"


def rank_device(backend: str, device: str, local_rank: int) -> torch.device:
    """The device a rank computes on: its own GPU on nccl; under gloo with ``device="cuda"`` the GPUs taken in
    turn by local rank (several ranks share one); the CPU otherwise."""
    if backend == "nccl":
        return torch.device("cuda", local_rank)
    if device == "cuda":
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def keep_off_gpus(backend: str) -> None:
    """A gloo rank on a machine with GPUs sees none of them (CUDA_VISIBLE_DEVICES="").

    Only possible before this process initialises CUDA; afterwards nothing is changed.
    """
    if backend != "gloo" or torch.cuda.is_initialized() or torch.cuda.device_count() == 0:
        return
    _visible_before_hiding.append(os.environ.get("CUDA_VISIBLE_DEVICES"))
    os.environ["CUDA_VISIBLE_DEVICES"] = ""


def visible_devices_before_hiding() -> tuple[bool, str | None]:
    """(whether ``keep_off_gpus`` hid the GPUs, CUDA_VISIBLE_DEVICES as it was before)."""
    return (True, _visible_before_hiding[0]) if _visible_before_hiding else (False, None)


def torchrun_store(settings: Settings, rank: int) -> dist.Store:
    """The store torchrun's environment points at (env://), as init_process_group would find it."""
    store, _, _ = next(
        dist.rendezvous("env://", rank, settings.world_size, timeout=settings.startup_timedelta)
    )
    return store


def join(settings: Settings, *, rank: int, local_rank: int, backend: str, store: dist.Store) -> RankContext:
    """Wait for every rank on ``store``, agree on the backend, then initialise the default and control groups."""
    store.set_timeout(settings.startup_timedelta)
    _arrive_together(store, settings.world_size)
    agree_on_backend(store, rank, settings.world_size, backend)
    store.set_timeout(settings.pg_timedelta)
    device = rank_device(backend, settings.device, local_rank)
    device_id = device if backend == "nccl" else None  # bound, as torch recommends; gloo takes no device
    if backend == "nccl":
        os.environ.setdefault(BLOCKING_WAIT, "1")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:
        keep_off_gpus(backend)
    dist.init_process_group(backend, store=store, rank=rank, world_size=settings.world_size,
                            timeout=settings.pg_timedelta, device_id=device_id)
    control = new_group(backend="gloo", timeout=settings.pg_timedelta)
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


def agree_on_backend(store: dist.Store, rank: int, world_size: int, backend: str,
                     key: str = "ddpc-harness/backend") -> None:
    """Every rank publishes its choice and reads everyone's; a mismatch raises on every rank, naming them."""
    store.set(f"{key}/{rank}", f"{backend} {os.uname().nodename}")
    choices = [store.get(f"{key}/{r}").decode().split(" ", 1) for r in range(world_size)]
    backends = {b for b, _ in choices}
    if len(backends) > 1:
        listed = ", ".join(f"rank {r} ({host}): {b}" for r, (b, host) in enumerate(choices))
        raise BackendMismatch(
            f"backend: got {sorted(backends)} across the ranks ({listed}), but should be one backend for the "
            "whole job: nccl needs a GPU for every rank on every node; give every node the same GPUs per rank "
            "or hide the GPUs everywhere (CUDA_VISIBLE_DEVICES=) to run on gloo"
        )


def leave() -> None:
    from .recording import forget_recorders

    forget_recorders()
    if dist.is_initialized():
        dist.destroy_process_group()
