"""Each node of a run, described by its first rank while the benchmarks run on it.

Every node records what its figures depend on: host, torch build, NCCL
version and every ``NCCL_*`` setting, and, with NVIDIA GPUs, NVML's devices
(compute mode included), links, P2P and topology, the NVLink traffic of the
benchmarks, and telemetry sampled while they ran (SM clock, power,
temperature, utilization): a GPU that throttled or sat idle explains a figure;
and what made the host noisy (``noise``: load, governors and frequencies,
other processes' share of the CPUs).
The NVML module is a parameter (``nvml=None`` imports pynvml) so tests can
hand in a fake.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Literal

from .host import Host
from datamodel import JsonModel, doc
from .noise import Noise, NoiseProbe
from .nvlink_traffic import NvlinkDelta, nvlink_throughput_delta, nvlink_throughput_sample
from .probe import Hardware, collect_hardware
from .telemetry import NoTelemetry, Telemetry, TelemetrySampler

Backend = Literal["gloo", "nccl"]
"""The process groups' backends this project measures and records."""


@dataclass(frozen=True, kw_only=True)
class Node(JsonModel):
    """One node the benchmarks ran on, described by its first rank while they ran."""

    node_rank: int = doc("the node's rank (torchrun's GROUP_RANK; 0 in plain mode)")
    first_rank: int = doc("the global rank that described the node")
    local_ranks: int = doc("ranks on the node (LOCAL_WORLD_SIZE)")
    host: Host = doc("the host: CPU, cores, memory, OS")
    devices: tuple[str, ...] = doc("the names of the CUDA devices torch sees (none on a CPU node)")
    nccl_version: str | None = doc("NCCL's version as torch was built with it, or null")
    nccl_env: dict[str, str] = doc("every NCCL_* variable set, by name")
    backend: Backend = doc("the ranks' process-group backend: gloo or nccl")
    hardware: Hardware = doc("the torch build and, with NVIDIA GPUs, NVML's devices with compute "
                                    "mode, links, P2P and topology")
    nvlink_delta: NvlinkDelta | None = doc("NVLink TX/RX KiB per GPU and link during the benchmarks, "
                                                  "or null without NVML")
    telemetry: Telemetry | NoTelemetry | None = doc(
        "min / median / max SM clock, power, temperature and utilization per GPU, sampled every second while "
        "the benchmarks ran, or why not; absent in runs before it was recorded", omit_none=True)
    noise: Noise | None = doc(
        "what made the node noisy (hardware/noise.py): usable cores, load average before and after, CPU "
        "frequency governors and current frequencies where exposed, other processes' and the hypervisor's "
        "share of the CPUs during the benchmarks; absent in runs before it was recorded", omit_none=True)
    benchmark_seconds: float = doc("seconds from the probe's start to its finish: the benchmarks")


class NodeProbe:
    """Started by a node's first rank before the benchmarks, finished after them."""

    def __init__(self, ctx, nvml: Any = None) -> None:
        self.ctx, self.nvml = ctx, nvml
        self.nvlink_before = nvlink_throughput_sample(nvml)
        self.telemetry = TelemetrySampler(nvml).start()
        self.noise = NoiseProbe().start()
        self.started = time.monotonic()

    def finish(self) -> Node:
        noise = self.noise.stop()
        telemetry = self.telemetry.stop()
        after = nvlink_throughput_sample(self.nvml)
        hardware = collect_hardware(self.nvml)
        return Node(
            node_rank=int(os.environ.get("GROUP_RANK", 0)),
            first_rank=self.ctx.rank,
            local_ranks=int(os.environ.get("LOCAL_WORLD_SIZE", self.ctx.world_size)),
            host=hardware.host,
            devices=tuple(d.name for d in hardware.torch.devices),
            nccl_version=hardware.torch.nccl_version,
            nccl_env={k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
            backend=self.ctx.backend,
            hardware=hardware,
            nvlink_delta=nvlink_throughput_delta(self.nvlink_before, after)
            if self.nvlink_before and after else None,
            telemetry=telemetry,
            noise=noise,
            benchmark_seconds=time.monotonic() - self.started,
        )


def first_rank_of_node(ctx) -> bool:
    """Plain mode is one node whose first rank is 0; under torchrun, LOCAL_RANK says."""
    return int(os.environ.get("LOCAL_RANK", ctx.rank)) == 0
