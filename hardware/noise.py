"""What makes a machine noisy while the benchmarks run, read beside the figures, and which of it looked wrong.

- the load average before and after, against the usable cores;
- the CPU frequency governor of each core and the current frequencies,
  where ``/sys`` says (cpufreq; many VMs do not);
- the other processes' share of the CPUs during the run: the busy time of
  ``/proc/stat`` over the window, less this job's own (the process tree of
  the probing rank's parent: the launcher and every rank under it), and the
  time the hypervisor stole.

A node records a ``Noise``. The emulated compute measures its own sleeps'
overshoot (time slept over time asked: ``benchmarks.measuring.emulation``), read here
as a ``SleepOvershoot``. ``suspects`` holds a reading against
``LIMITS`` (rules as data) and says, in words, what looked wrong; the report
names them when gated figures miss their targets.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .host import usable_cores
from datamodel import JsonModel, doc


class Limits(NamedTuple):
    """Past these, a reading is named as a likely cause of noise."""

    load_per_core: float  # load average per usable core before the run
    other_processes_share: float  # share of all CPUs other processes used during it
    steal_share: float  # share the hypervisor stole
    frequency_spread: float  # spread of the cores' current frequencies: (max - min) / max
    sleep_overshoot_median: float  # the emulated compute's sleeps, time slept over time asked
    sleep_overshoot_p90: float


LIMITS = Limits(load_per_core=0.5, other_processes_share=0.10, steal_share=0.05, frequency_spread=0.20,
                sleep_overshoot_median=1.10, sleep_overshoot_p90=1.50)
STEADY_GOVERNORS = ("performance",)


@dataclass(frozen=True, kw_only=True)
class Spread(JsonModel):
    """Lowest, median and highest of several cores' readings."""

    min: float = doc("lowest")
    median: float = doc("median")
    max: float = doc("highest")


@dataclass(frozen=True, kw_only=True)
class Noise(JsonModel):
    """What made a node noisy while the benchmarks ran; a reading the host does not give is null (the CPU
    shares: absent)."""

    cores: int | None = doc("usable cores (all cores where the OS does not say)", default=None)
    seconds: float | None = doc("seconds between the two readings", default=None)
    load_before: tuple[float, ...] | None = doc("load average (1, 5, 15 min) before the benchmarks",
                                                       default=None)
    load_after: tuple[float, ...] | None = doc("load average (1, 5, 15 min) after them", default=None)
    governors: dict[str, int] | None = doc("CPU frequency governor -> cores running it, where cpufreq "
                                                  "says", default=None)
    frequency_mhz: Spread | None = doc("the cores' current frequencies in MHz, where cpufreq says",
                                              default=None)
    other_processes_share: float | None = doc(
        "share of all CPUs other processes used during the benchmarks: busy time less this job's own (the "
        "probing rank's parent and every process under it)", omit_none=True)
    own_share: float | None = doc("share of all CPUs this job used", omit_none=True)
    steal_share: float | None = doc("share of all CPUs the hypervisor stole", omit_none=True)


@dataclass(frozen=True, kw_only=True)
class SleepOvershoot(JsonModel):
    """How late the emulated compute's sleeps woke: time slept over time asked (``benchmarks.measuring.emulation``)."""

    n: int = doc("sleeps")
    median: float = doc("median of slept over asked")
    p90: float = doc("90th percentile")
    max: float = doc("highest")


class CpuTimes(NamedTuple):
    """All CPUs' jiffies from ``/proc/stat``."""

    total: int
    busy: int
    steal: int


class NoiseProbe:
    """Read at ``start()`` and at ``stop()``, around the benchmarks, on a node's first rank."""

    def __init__(self, root_pid: int | None = None, proc: Path = Path("/proc"), sys: Path = Path("/sys")) -> None:
        self.root_pid = os.getppid() if root_pid is None else root_pid
        self.proc, self.sys = proc, sys

    def start(self) -> "NoiseProbe":
        self.load_before = _loadavg()
        self.cpu_before = _cpu_times(self.proc)
        self.own_before = _tree_ticks(self.proc, self.root_pid)
        self.started = time.monotonic()
        return self

    def stop(self) -> Noise:
        cpu_after, own_after = _cpu_times(self.proc), _tree_ticks(self.proc, self.root_pid)
        governors, frequency = _frequencies(self.sys)
        shares = {}
        if self.cpu_before and cpu_after:
            total = cpu_after.total - self.cpu_before.total
            busy = cpu_after.busy - self.cpu_before.busy
            steal = cpu_after.steal - self.cpu_before.steal
            own = own_after - self.own_before
            if total > 0:
                shares = {"other_processes_share": round(max(0.0, busy - own) / total, 4),
                          "own_share": round(own / total, 4), "steal_share": round(steal / total, 4)}
        return Noise(cores=usable_cores() or os.cpu_count() or 1,
                     seconds=round(time.monotonic() - self.started, 3), load_before=self.load_before,
                     load_after=_loadavg(), governors=governors, frequency_mhz=frequency, **shares)


def suspects(noise: Noise | None, overshoot: SleepOvershoot | None = None) -> list[str]:
    """What in a node's reading (and the emulated compute's sleeps) looked wrong, one line each."""
    found = []
    noise = noise or Noise()
    cores = noise.cores or 1
    load = noise.load_before
    if load and load[0] / cores > LIMITS.load_per_core:
        found.append(f"the load average before the run was {load[0]:.2f} on {cores} cores")
    for share, limit, what in ((noise.other_processes_share, LIMITS.other_processes_share,
                                "other processes used"),
                               (noise.steal_share, LIMITS.steal_share, "the hypervisor stole")):
        if share is not None and share > limit:
            found.append(f"{what} {share:.0%} of the CPUs during the run")
    unsteady = sorted(g for g in noise.governors or {} if g not in STEADY_GOVERNORS)
    if unsteady:
        found.append(f"CPU frequency governor {', '.join(unsteady)} (not performance): frequencies move with load")
    frequency = noise.frequency_mhz
    if frequency and frequency.max and \
            (frequency.max - frequency.min) / frequency.max > LIMITS.frequency_spread:
        found.append(f"the cores ran at {frequency.min:.0f}-{frequency.max:.0f} MHz")
    if overshoot and (overshoot.median > LIMITS.sleep_overshoot_median
                      or overshoot.p90 > LIMITS.sleep_overshoot_p90):
        found.append(f"the emulated compute's sleeps woke late: median {overshoot.median:.2f}x, "
                     f"90th percentile {overshoot.p90:.2f}x the time asked")
    return found


def _loadavg() -> tuple[float, ...] | None:
    try:
        return tuple(round(v, 2) for v in os.getloadavg())
    except OSError:
        return None


def _cpu_times(proc: Path) -> CpuTimes | None:
    """All CPUs' jiffies from ``/proc/stat``: total, busy (not idle or iowait) and stolen."""
    try:
        fields = [int(v) for v in (proc / "stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    steal = fields[7] if len(fields) > 7 else 0
    total = sum(fields[:8])
    return CpuTimes(total=total, busy=total - idle - steal, steal=steal)


def _tree_ticks(proc: Path, root: int) -> int:
    """User and system jiffies of ``root`` and every process under it."""
    parents, ticks = {}, {}
    for entry in proc.iterdir() if proc.exists() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = int(fields[11]) + int(fields[12])
    total = 0
    for pid in ticks:
        walk = pid
        while walk in parents and walk != root and walk > 1:
            walk = parents[walk]
        if walk == root:
            total += ticks[pid]
    return total


def _frequencies(sys: Path) -> tuple[dict[str, int] | None, Spread | None]:
    """Governors (count of cores each) and current frequencies in MHz, where cpufreq exposes them."""
    governors: dict[str, int] = {}
    current = []
    for cpu in sorted((sys / "devices/system/cpu").glob("cpu[0-9]*")) if sys.exists() else ():
        freq = cpu / "cpufreq"
        try:
            governor = (freq / "scaling_governor").read_text().strip()
            governors[governor] = governors.get(governor, 0) + 1
            current.append(int((freq / "scaling_cur_freq").read_text()) / 1e3)
        except (OSError, ValueError):
            continue
    if not current:
        return governors or None, None
    return governors, Spread(min=min(current), median=statistics.median(current), max=max(current))
