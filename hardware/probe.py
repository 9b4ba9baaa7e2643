"""Everything a run records about the machine it ran on: ``collect_hardware()``; ``python -m hardware``."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from cli import Parser
from datamodel import JsonModel, doc

from .devices import NoNvml, Nvml, collect_nvml, map_torch_devices
from .host import Host, TorchBuild, collect_host, collect_torch


@dataclass(frozen=True, kw_only=True)
class Hardware(JsonModel):
    """The machine as the report shows it: host, torch build and, with NVIDIA GPUs, what NVML sees."""

    host: Host = doc("the host: CPU, cores, memory, OS, Python")
    torch: TorchBuild = doc("torch's build: CUDA, gloo, NCCL and the CUDA devices it sees")
    nvml: Nvml | NoNvml = doc("NVML's devices with compute mode, links, P2P and topology, or why "
                                     "NVML is unavailable")


def collect_hardware(nvml: Any = None) -> Hardware:
    """Everything the report needs about the machine."""
    torch_info = collect_torch()
    nvml_info = map_torch_devices(torch_info, collect_nvml(nvml))
    return Hardware(host=collect_host(), torch=torch_info, nvml=nvml_info)


def parser() -> Parser:
    return Parser(prog="python -m hardware", description=__doc__.splitlines()[0])


def main(argv: Sequence[str] | None = None) -> int:
    parser().parse_args(argv)
    written = collect_hardware().to_json()
    Hardware.from_json(written)  # what a driver gave that the records cannot read back fails here, by its path
    print(json.dumps(written, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
