"""Transformer Engine and Apex, as GPU images ship them: found, named, kept out of megatron-core's optimizer.

megatron-core picks its optimizer classes when its modules are imported:
Transformer Engine's fused Adam and SGD when it imports, else Apex's, else
torch's (``optimizer/__init__.py:12-34`` and ``optimizer/distrib_optimizer.py:20-35``
in 0.16.1 and 0.19.2). With the fused ones its distributed optimizer refuses
SGD (the "Only Adam" assert, which P5 of ``megatron_cpu`` opens to torch's SGD
only) and its Adam no longer equals torch's bitwise. So while the adapter
builds upstream's optimizer, those modules' names are the ones their torch
branch binds, and upstream builds torch's optimizers, as where neither
library is installed. Their multi-tensor kernels (norms, scaling) stay in use.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import importlib.util
from typing import Iterator
from unittest import mock

import torch

LIBRARIES = {"transformer_engine": "Transformer Engine", "apex": "Apex"}  # top-level module -> name

# What each module's torch branch binds, as megatron-core 0.16.1 and 0.19.2 write it; a name a version lacks
# is left alone. Only what building the optimizer reads (checkpointing reads distrib_optimizer's flags).
TORCH_BRANCH = {
    "megatron.core.optimizer": {"Adam": torch.optim.AdamW, "SGD": torch.optim.SGD,
                                "USING_PYTORCH_OPTIMIZER": True},
    "megatron.core.optimizer.distrib_optimizer": {"Adam": torch.optim.Adam},
}


@functools.cache
def installed() -> tuple[str, ...]:
    """The fused-kernel libraries importable here, each with its version, found without importing them."""
    found = []
    for module, name in LIBRARIES.items():
        if importlib.util.find_spec(module) is None:
            continue
        distributions = importlib.metadata.packages_distributions().get(module, [])
        versions = sorted({importlib.metadata.version(d) for d in distributions})
        found.append(f"{name} {', '.join(versions) or '(version unknown)'}")
    return tuple(found)


def report_line() -> str:
    """What the pytest header says about them."""
    if not installed():
        return "megatron-core's optimizer: torch's (neither Transformer Engine nor Apex is installed)"
    found = installed()
    return (f"megatron-core's optimizer: torch's ({' and '.join(found)} found: "
            f"{'its' if len(found) == 1 else 'their'} fused Adam and SGD kept out while it is built)")


@contextlib.contextmanager
def kept_out() -> Iterator[None]:
    """Upstream's optimizer modules bind their torch branch's classes while this is entered."""
    with contextlib.ExitStack() as stack:
        for module_name, names in TORCH_BRANCH.items():
            module = importlib.import_module(module_name)
            for name, value in names.items():
                if hasattr(module, name):
                    stack.enter_context(mock.patch.object(module, name, value))
        yield
