"""The host (CPU model, memory, usable cores) and the torch build (CUDA, NCCL, devices torch sees)."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datamodel import JsonModel, doc


@dataclass(frozen=True, kw_only=True)
class Host(JsonModel):
    """The machine a node's ranks ran on: what every figure in the report depends on."""

    cpu_model: str = doc("the CPU's marketing name (/proc/cpuinfo's model name)")
    logical_cores: int | None = doc("logical cores the host has (os.cpu_count())")
    usable_cores: int | None = doc("cores this process may run on (a container or taskset may allow "
                                          "fewer); null where the OS does not say, and in runs before it was "
                                          "recorded", default=None)
    memory_bytes: int | None = doc("physical memory in bytes (MemTotal); null where neither /proc nor "
                                          "sysconf says")
    os: str = doc("the operating system (platform.platform())")
    hostname: str = doc("the host's network name")
    machine: str = doc("the CPU architecture (x86_64, aarch64)")
    python: str = doc("the Python version")


@dataclass(frozen=True, kw_only=True)
class TorchDevice(JsonModel):
    """A CUDA device as torch sees it, or the error that kept this process from it."""

    index: int = doc("torch's device index")
    name: str = doc("the device's name; 'unusable' where torch could not open it")
    uuid: str | None = doc("the device's UUID, which maps it to its NVML device; null when unknown")
    total_memory_bytes: int | None = doc("the device's memory in bytes", omit_none=True)
    capability: str | None = doc("CUDA compute capability, major.minor", omit_none=True)
    error: str | None = doc("why torch could not use the device (another process holds it in an "
                                   "exclusive compute mode, ...): the error's first line", omit_none=True)


@dataclass(frozen=True, kw_only=True)
class TorchBuild(JsonModel):
    """torch's build and what it can use here: CUDA, gloo, NCCL, and the CUDA devices it sees."""

    torch: str = doc("torch's version")
    cuda_build: str | None = doc("the CUDA version torch was built with; null for a CPU build")
    cuda_available: bool = doc("whether CUDA works here")
    cuda_device_count: int = doc("CUDA devices torch sees (0 without CUDA)")
    cuda_visible_devices: str | None = doc("CUDA_VISIBLE_DEVICES as set, or null")
    distributed_available: bool = doc("whether torch.distributed is built in")
    gloo_available: bool = doc("whether the gloo backend is")
    nccl_available: bool = doc("whether the NCCL backend is")
    nccl_version: str | None = doc("NCCL's version as torch was built with it (asked only where CUDA "
                                          "works), 'unknown (<error>)' where torch could not say, else null")
    devices: tuple[TorchDevice, ...] = doc("every CUDA device torch sees (none without CUDA)")


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's marketing name, so runs on different hosts are told apart."""
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def total_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """Physical memory in bytes (MemTotal), falling back to sysconf where /proc is missing."""
    try:
        for line in meminfo.read_text().splitlines():
            fields = line.split()
            if fields[:1] == ["MemTotal:"] and fields[2:3] == ["kB"]:
                return int(fields[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def usable_cores() -> int | None:
    """Cores this process may run on (a container or taskset may allow fewer than the host has)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return None


def collect_host() -> Host:
    """CPU, memory, OS and Python: what every figure in the report depends on."""
    return Host(cpu_model=cpu_model(), logical_cores=os.cpu_count(), usable_cores=usable_cores(),
                memory_bytes=total_memory_bytes(), os=platform.platform(), hostname=platform.node(),
                machine=platform.machine(), python=platform.python_version())


def nccl_version_string(version: Any) -> str:
    """torch.cuda.nccl.version() gives (2, 21, 5) or (2, 21, 5, 'suffix'); older torch an int 22105."""
    if isinstance(version, int):  # NCCL_VERSION_CODE: major*10000 + minor*100 + patch (major*1000 before 2.9)
        major, rest = divmod(version, 10000 if version >= 10000 else 1000)
        return f"{major}.{rest // 100}.{rest % 100}"
    parts = [str(p) for p in version]
    suffix = f"-{parts[3]}" if len(parts) > 3 and parts[3] else ""
    return ".".join(parts[:3]) + suffix


def nccl_version(torch: Any) -> str | None:
    """NCCL's version as torch was built with it; only asked when CUDA works (it needs the library)."""
    if not torch.cuda.is_available() or not torch.distributed.is_nccl_available():
        return None
    try:
        return nccl_version_string(torch.cuda.nccl.version())
    except (RuntimeError, AttributeError) as exc:
        return f"unknown ({type(exc).__name__}: {exc})"


def torch_devices(torch: Any) -> tuple[TorchDevice, ...]:
    """Each torch CUDA device with its UUID, so torch index -> NVML device can be mapped.

    A device this process may not use (another process holds it in an exclusive compute mode) is
    recorded with the error instead of failing the run.
    """
    devices = []
    for index in range(torch.cuda.device_count()):
        try:
            props = torch.cuda.get_device_properties(index)
        except RuntimeError as exc:
            devices.append(TorchDevice(index=index, name="unusable", uuid=None,
                                       error=str(exc).splitlines()[0]))
            continue
        uuid = getattr(props, "uuid", None)
        devices.append(TorchDevice(index=index, name=props.name, uuid=str(uuid) if uuid is not None else None,
                                   total_memory_bytes=props.total_memory,
                                   capability=f"{props.major}.{props.minor}"))
    return tuple(devices)


def collect_torch() -> TorchBuild:
    """torch's build and what it can use here: CUDA, gloo, NCCL."""
    import torch
    import torch.distributed

    distributed = torch.distributed.is_available()
    cuda = torch.cuda.is_available()
    return TorchBuild(
        torch=str(torch.__version__),
        cuda_build=torch.version.cuda,
        cuda_available=cuda,
        cuda_device_count=torch.cuda.device_count() if cuda else 0,
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        distributed_available=distributed,
        gloo_available=distributed and torch.distributed.is_gloo_available(),
        nccl_available=distributed and torch.distributed.is_nccl_available(),
        nccl_version=nccl_version(torch) if distributed else None,
        devices=torch_devices(torch) if cuda else (),
    )
