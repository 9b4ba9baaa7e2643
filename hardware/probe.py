"""Everything a run records about the machine it ran on: ``collect_hardware()``; ``python -m hardware``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from .devices import collect_nvml, map_torch_devices
from .host import collect_host, collect_torch


def collect_hardware(nvml: Any = None) -> dict:
    """Everything the report needs about the machine, JSON-serialisable."""
    torch_info = collect_torch()
    nvml_info = collect_nvml(nvml)
    map_torch_devices(torch_info, nvml_info)
    return {"host": collect_host(), "torch": torch_info, "nvml": nvml_info}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hardware", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    print(json.dumps(collect_hardware(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
