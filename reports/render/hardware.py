"""The hardware section of the report: host, devices, NVLink, P2P and topology, as github tables.

A field NVML refused is shown as ``n/a (<error>)`` rather than dropped.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from hardware.devices import (
    RESTRICTED_COMPUTE_MODES,
    TOPOLOGY_LEVELS,
    DevicePair,
    NoNvml,
    NvLinks,
    Nvml,
    NvmlDevice,
    UnreachableDevice,
)
from hardware.node import Node
from hardware.noise import Noise, suspects
from hardware.nvlink_traffic import NvlinkDelta
from hardware.nvml import Unsupported
from hardware.probe import Hardware
from hardware.telemetry import FieldSummary, NoTelemetry, Telemetry

from .table import bytes_label, table

NO_LINKS = NvLinks(links=(), unanswered={})


def cell(value: Any, fmt: Callable[[Any], str] = str) -> str:
    """A table cell: unsupported fields read 'n/a (<error>)', missing ones 'n/a'."""
    if isinstance(value, Unsupported):
        return f"n/a ({value.error})"
    if value is None:
        return "n/a"
    return fmt(value)


def yes_no(flag: Any) -> str:
    return "yes" if flag else "no"


def host_table(hw: Hardware) -> str:
    host, t = hw.host, hw.torch
    cores = f"{host.logical_cores}"
    if host.usable_cores not in (None, host.logical_cores):
        cores += f" ({host.usable_cores} usable by this process)"
    cuda = f"build {t.cuda_build or 'none (CPU build)'}; available: {yes_no(t.cuda_available)}"
    if t.cuda_available:
        cuda += f", {t.cuda_device_count} device(s)"
    if t.cuda_visible_devices is not None:
        cuda += f"; CUDA_VISIBLE_DEVICES={t.cuda_visible_devices}"
    nccl = yes_no(t.nccl_available) + (f" ({t.nccl_version})" if t.nccl_version else "")
    rows = [
        ("CPU", host.cpu_model),
        ("logical cores", cores),
        ("memory", cell(host.memory_bytes, bytes_label)),
        ("OS", host.os),
        ("Python", host.python),
        ("torch", t.torch),
        ("CUDA", cuda),
        ("gloo", yes_no(t.gloo_available)),
        ("NCCL", nccl),
    ]
    return table(rows, ["host", ""], numparse=False)


def pair(current: Any, maximum: Any, fmt: Callable[[Any], str] = str, sep: str = " / ") -> str:
    return f"{cell(current, fmt)}{sep}{cell(maximum, fmt)}"


def device_row(d: NvmlDevice | UnreachableDevice) -> dict:
    if isinstance(d, UnreachableDevice):
        return {"nvml": d.index, "name": cell(d.handle)}
    return {
        "nvml": d.index,
        "torch": cell(d.torch_index),
        "name": cell(d.name),
        "bus id": cell(d.pci_bus_id),
        "memory used / total": pair(d.memory_used_bytes, d.memory_total_bytes, bytes_label),
        "SM MHz now / max": pair(d.sm_clock_mhz, d.sm_clock_max_mhz),
        "mem MHz now / max": pair(d.memory_clock_mhz, d.memory_clock_max_mhz),
        "power W / limit": pair(d.power_draw_w, d.power_limit_w, lambda w: f"{w:.0f}"),
        "temp C": cell(d.temperature_c),
        "compute mode": cell(d.compute_mode),
        "PCIe gen x width (max)": f"{pair(d.pcie_generation, d.pcie_width, sep=' x')} "
                                  f"({pair(d.pcie_generation_max, d.pcie_width_max, sep=' x')})",
    }


def devices_table(nvml: Nvml) -> str:
    rows = [device_row(d) for d in nvml.devices]
    return table(rows, numparse=False)


def distinct(values: list[str]) -> str:
    return ", ".join(dict.fromkeys(values)) or "-"


def nvlink_row(d: NvmlDevice | UnreachableDevice) -> dict:
    nv = d.nvlink if isinstance(d, NvmlDevice) else NO_LINKS
    up = [link for link in nv.links if link.active]
    return {
        "nvml": d.index,
        "links active": f"{len(up)} of {len(nv.links)} answering",
        "version enum": distinct([cell(link.version_enum) for link in up]),
        "generation": distinct([cell(link.generation) for link in up]),
        "remote bus ids": distinct([cell(link.remote_pci_bus_id) for link in up]),
        "links not answering": "; ".join(f"{len(ls)} ({err})" for err, ls in nv.unanswered.items()) or "-",
    }


def nvlink_table(nvml: Nvml) -> str:
    return table([nvlink_row(d) for d in nvml.devices], numparse=False)


def pair_cell(record: DevicePair) -> str:
    p2p = cell(record.p2p_nvlink, lambda p: p.name)
    topo = cell(record.topology, lambda t: t.name)
    return f"{p2p} / {topo}"


def pairs_matrix(nvml: Nvml) -> str:
    count = len(nvml.devices)
    by_pair = {(p.a, p.b): p for p in nvml.pairs}
    rows = [[f"GPU{a}"] + ["X" if a == b else pair_cell(by_pair[(a, b)]) for b in range(count)]
            for a in range(count)]
    legend = "; ".join(f"{name} = {meaning}" for name, meaning in TOPOLOGY_LEVELS.values())
    return (table(rows, ["NVLink P2P / topology"] + [f"GPU{b}" for b in range(count)], numparse=False)
            + f"\n\nTopology (closest common ancestor): {legend}.")


def kib(n: Any) -> str:
    return f"{n:,} KiB ({n / 1024**2:.2f} GiB)"


def traffic_table(delta: NvlinkDelta) -> str:
    rows = [{"nvml": d.index, "link": scope, "TX": cell(c.tx_kib, kib), "RX": cell(c.rx_kib, kib)}
            for d in delta.devices for scope, c in d.counters.items()]
    if not rows:
        return "NVLink data moved during the measurement: no NVLink counter could be read."
    return (f"NVLink data moved during the measurement ({delta.seconds:.1f} s; 'total' is NVML's sum "
            f"over all links):\n\n" + table(rows, numparse=False))


def restricted_modes(nvml: Nvml) -> str | None:
    """A plain sentence when some GPU refuses other processes (exclusive or prohibited compute mode)."""
    held = [(d.index, d.compute_mode) for d in nvml.devices
            if isinstance(d, NvmlDevice) and d.compute_mode in RESTRICTED_COMPUTE_MODES]
    if not held:
        return None
    listed = ", ".join(f"GPU {i} ({mode})" for i, mode in held)
    return (f"Compute mode: {listed}. Only one process may use such a GPU: run one rank per GPU "
            "(torchrun --nproc-per-node = GPUs), and expect the suites' spawned ranks and anything else that "
            "touches a GPU already in use to be refused; the report records those devices as unusable rather "
            "than failing.")


def telemetry_table(telemetry: Telemetry | NoTelemetry) -> str:
    """Min / median / max of each GPU's SM clock, power, temperature and utilization while the benchmarks ran."""
    if isinstance(telemetry, NoTelemetry):
        return f"GPU telemetry during the benchmarks: none ({telemetry.reason})."
    rows = [{"nvml": d.index, "SM MHz": _spread(d.sm_clock_mhz), "power W": _spread(d.power_w),
             "temp C": _spread(d.temperature_c), "util %": _spread(d.utilization_pct)}
            for d in telemetry.devices]
    return (f"GPU telemetry while the benchmarks ran (sampled every {telemetry.interval_s:g} s; "
            "min / median / max):\n\n" + table(rows, numparse=False))


def _spread(stats: FieldSummary | None) -> str:
    if not stats:
        return "n/a"
    return f"{stats.min:.0f} / {stats.median:.0f} / {stats.max:.0f}"


def gpu_sections(nvml: Nvml, nvlink_delta: NvlinkDelta | None,
                 telemetry: Telemetry | NoTelemetry | None) -> list[str]:
    head = (f"NVIDIA driver {cell(nvml.driver_version)}, CUDA driver {cell(nvml.cuda_driver_version)}, "
            f"NVML {cell(nvml.nvml_version)}. NVML indices ignore CUDA_VISIBLE_DEVICES; the torch "
            f"column maps them to torch device indices by UUID.")
    sections = [head, devices_table(nvml), nvlink_table(nvml)]
    restricted = restricted_modes(nvml)
    if restricted:
        sections.append(restricted)
    if len(nvml.devices) > 1:
        sections.append(pairs_matrix(nvml))
    if nvlink_delta is not None:
        sections.append(traffic_table(nvlink_delta))
    if telemetry is not None:
        sections.append(telemetry_table(telemetry))
    return sections


def hardware_markdown(hw: Hardware, nvlink_delta: NvlinkDelta | None = None,
                      telemetry: Telemetry | NoTelemetry | None = None) -> str:
    """One node's hardware: host table, then the GPUs or a plain sentence that there are none."""
    nvml = hw.nvml
    sections = [host_table(hw)]
    if isinstance(nvml, NoNvml):
        sections.append(f"No NVIDIA GPU: NVML unavailable ({nvml.reason}).")
    elif not nvml.devices:
        sections.append(f"No NVIDIA GPU: NVML found no device (device count: {cell(nvml.device_count)}).")
    else:
        sections.extend(gpu_sections(nvml, nvlink_delta, telemetry))
    return "\n\n".join(sections)


def nodes_markdown(nodes: Sequence[Node]) -> str:
    """Every node the benchmarks ran on, with what changes NCCL's results: its version and NCCL_* settings."""
    if not nodes:
        return "No benchmark ranks ran."
    rows = [{"node": n.node_rank, "first rank": n.first_rank, "local ranks": n.local_ranks,
             "host": n.host.hostname, "CPU": n.host.cpu_model,
             "cores": cell(n.host.logical_cores), "memory": cell(n.host.memory_bytes, bytes_label),
             "devices": ", ".join(n.devices) or "none", "backend": n.backend,
             "NCCL": cell(n.nccl_version),
             "NCCL_* set": ", ".join(f"{k}={v}" for k, v in n.nccl_env.items()) or "none"}
            for n in nodes]
    return table(rows, numparse=False)


def noise_markdown(nodes: Sequence[Node]) -> str:
    """What made each node noisy while the benchmarks ran (``hardware.noise``), and what of it looked wrong."""
    rows = []
    for n in nodes:
        noise = n.noise or Noise()
        frequency = noise.frequency_mhz
        rows.append({"node": n.node_rank, "cores": "" if noise.cores is None else noise.cores,
                     "load before / after (1 min)": _load(noise),
                     "other processes' CPU share": _share(noise.other_processes_share),
                     "stolen": _share(noise.steal_share),
                     "governors": ", ".join(f"{g} x{c}" for g, c in (noise.governors or {}).items())
                     or "not exposed",
                     "current MHz (min-max)": f"{frequency.min:.0f}-{frequency.max:.0f}" if frequency
                     else "not exposed",
                     "looked wrong": "; ".join(suspects(noise)) or "nothing"})
    return table(rows, numparse=False) if rows else "No node was probed."


def _load(noise: Noise) -> str:
    before, after = noise.load_before, noise.load_after
    return f"{before[0]:.2f} / {after[0]:.2f}" if before and after else "n/a"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"
