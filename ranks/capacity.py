"""How many ranks this machine can hold when they are spawned on it: refused past that, unless insisted on.

Each spawned rank is a Python process with torch imported (about 270 MB
resident before any tensor, on torch 2.13 CPU), and ranks on gloo keep a
core busy in every collective. A world size past both is refused before any
rank starts, saying the bound and why: 1,000 ranks asked by a typo would
otherwise take the machine's memory within a minute.
"""

from __future__ import annotations

import os

from cli import Arg, Count

from .startup import ALLOW_WORLD_SIZE_ENV

RANK_BYTES = 512 * 2**20
"""Memory a spawned rank is allowed for: torch imported (about 270 MB) and the suites' or benchmarks' tensors."""
RANKS_PER_CORE = 8
"""Ranks a core may be shared among: gloo's collectives still progress, slowly."""


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def available_memory(meminfo: str = "/proc/meminfo") -> int | None:
    """MemAvailable in bytes, or None where /proc does not say."""
    try:
        with open(meminfo) as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def max_ranks(cores: int | None = None, memory: int | None = None) -> tuple[int, str]:
    """The most ranks this machine holds, and why: the tighter of cores and available memory."""
    cores = usable_cores() if cores is None else cores
    memory = available_memory() if memory is None else memory
    by_cores = cores * RANKS_PER_CORE
    why = f"{cores} usable cores x {RANKS_PER_CORE} ranks a core"
    if memory is not None and memory // RANK_BYTES < by_cores:
        return max(1, memory // RANK_BYTES), (f"{memory / 2**30:.1f} GiB available / {RANK_BYTES // 2**20} MiB a "
                                              "rank")
    return by_cores, why


def world_size_problem(world_size: int, insist: bool, flag: str) -> str | None:
    """Why ``world_size`` spawned ranks should not start here, or None; ``flag`` is how to insist."""
    if world_size < 1:
        return f"--world-size: got {world_size}, but should be >= 1"
    bound, why = max_ranks()
    if world_size > bound and not insist:
        return (f"--world-size: got {world_size}, but this machine holds at most {bound} spawned ranks ({why}); "
                f"pass {flag} to start them anyway")
    return None


class WorldSize(Arg):
    """A world size of spawned ranks: at least ``minimum``, and no more than this machine holds (``max_ranks``)
    unless ``insisted`` (the command's --allow-world-size, or DDPC_ALLOW_WORLD_SIZE) says to start them anyway."""

    kind = "world size"

    def __init__(self, minimum: int = 1, why: str = "", insisted: bool | None = None) -> None:
        self.minimum, self.why = minimum, why
        self.insisted = bool(os.environ.get(ALLOW_WORLD_SIZE_ENV)) if insisted is None else insisted

    def __call__(self, text: str) -> int:
        value = Count(self.minimum, why=self.why)(text)
        bound, why = max_ranks()
        if value > bound and not self.insisted:
            self.refuse(text, f"at most {bound}, the spawned ranks this machine holds ({why}); set "
                              f"{ALLOW_WORLD_SIZE_ENV}=1 to start them anyway")
        return value
