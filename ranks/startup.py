"""How ranks are started and how long they wait for each other: one value shared by both launch modes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

WORLD_SIZE_ENV = "DDPC_WORLD_SIZE"
ALLOW_WORLD_SIZE_ENV = "DDPC_ALLOW_WORLD_SIZE"
"""Set (to anything but empty): spawn the world size asked for even past the machine's bound (ranks.capacity)."""
DEFAULT_WORLD_SIZE = 2
DEVICE_ENV = "DDPC_DEVICE"
DEVICES = ("auto", "cpu", "cuda")
"""Where the ranks' tensors live. ``auto``: NCCL on CUDA where every rank of a node has a GPU of its own, gloo
on the CPU otherwise; ``cpu``: gloo on the CPU, GPUs hidden; ``cuda``: NCCL where every rank has a GPU of its
own, else gloo over CUDA tensors, the ranks sharing the GPUs (NCCL refuses two ranks on one GPU)."""
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")


@dataclass(frozen=True)
class Settings:
    mode: str
    """``"torchrun"``: this process is one rank; ``"plain"``: this process drives a worker pool."""
    world_size: int
    pg_timeout: float
    """Seconds a collective waits for its peers (the process group's timeout)."""
    rank_timeout: float
    """Seconds the harness waits for every rank to finish one check; larger than ``pg_timeout``."""
    impl_spec: str
    """The ``--impl`` string, handed to every rank's ``RankContext``."""
    threads: int = 1
    """torch's intra-op threads per spawned rank (the suites' ranks use one; benchmarks may use more)."""
    device: str = "auto"
    """One of ``DEVICES``."""
    crash_reruns: int = 1
    """Times a check whose rank died of a signal runs again on fresh ranks, plain mode only (under torchrun the
    death ends the run). A native crash that comes and goes (a heap corruption in a peer's collectives on gloo)
    then costs a rerun, said, instead of the run; one that comes back fails as before."""

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"device: got {self.device!r}, but should be one of {', '.join(DEVICES)}")

    @property
    def pg_timedelta(self) -> timedelta:
        return timedelta(seconds=self.pg_timeout)

    @property
    def rank_timedelta(self) -> timedelta:
        return timedelta(seconds=self.rank_timeout)

    @property
    def startup_timedelta(self) -> timedelta:
        """How long ranks wait for each other to start: imports and collection may take a while."""
        return timedelta(seconds=max(self.rank_timeout, 60.0))


def launched_by_torchrun(environ: Mapping[str, str] = os.environ) -> bool:
    return all(name in environ for name in TORCHRUN_ENV)


# Everything torchrun's agent tells its workers. A child process that inherits them believes it is a
# rank of that job and waits at a store whose other ranks have moved on.
TORCHRUN_VARIABLES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
    "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
)
TORCHRUN_PREFIXES = ("TORCHELASTIC_",)


def outside_torchrun(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``environ`` without torchrun's variables: for a child process that must start a job of its own."""
    return {k: v for k, v in environ.items()
            if k not in TORCHRUN_VARIABLES and not k.startswith(TORCHRUN_PREFIXES)}
