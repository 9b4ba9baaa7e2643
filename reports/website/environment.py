"""What a run ran on, as facts side by side: what changed between two nights is the first thing a regression
hunt asks (torch, CUDA, NCCL, the driver, Python, the NCCL_* variables, the project's commit, the host, the
CPU governors and the load), read from the run and its nodes alone."""

from __future__ import annotations

from dataclasses import dataclass

from hardware.devices import NoNvml
from hardware.node import Node

from ..render.hardware import cell
from ..store.model import Results

UNSET = "unset"
SHORT = (("torch", "torch"), ("CUDA", "CUDA (torch build)"), ("NCCL", "NCCL"), ("driver", "NVIDIA driver"),
         ("Python", "Python"))
"""The facts a hover names, as it names them."""


def driver(node: Node) -> str:
    nvml = node.hardware.nvml
    return f"none ({nvml.reason})" if isinstance(nvml, NoNvml) else cell(nvml.driver_version)


def node_facts(node: Node) -> dict[str, str]:
    torch = node.hardware.torch
    noise = node.noise
    load = noise.load_before if noise else None
    facts = {
        "hostname": node.host.hostname,
        "torch": torch.torch,
        "CUDA (torch build)": torch.cuda_build or "none (CPU build)",
        "NCCL": node.nccl_version or "none",
        "NVIDIA driver": driver(node),
        "Python": node.host.python,
        "devices": ", ".join(node.devices) or f"cpu: {node.host.cpu_model}",
        "CPU governors": ", ".join(f"{g} x{c}" for g, c in (noise.governors or {}).items()) if noise and
        noise.governors else "not exposed",
        "load before (1, 5, 15 min)": ", ".join(f"{v:.2f}" for v in load) if load else "not recorded",
    }
    facts.update(node.nccl_env)
    return facts


def environment(results: Results) -> dict[str, str]:
    """Every fact of the run, in a fixed order; a node's facts are prefixed with it when there are several."""
    facts = {"project commit": results.run.commit or "not recorded", "host (rank 0)": results.run.host}
    several = len(results.nodes) > 1
    for node in results.nodes:
        prefix = f"node {node.node_rank}: " if several else ""
        facts.update({prefix + k: v for k, v in node_facts(node).items()})
    return facts


def one_line(results: Results) -> str:
    """The facts a chart's point shows on hover: commit, then the first node's versions and host."""
    facts = environment(results)
    shown = [f"commit {facts['project commit'][:12]}"]
    node = results.nodes[0] if results.nodes else None
    if node is not None:
        own = node_facts(node)
        shown.append(" · ".join(f"{label} {own[key].split(' (')[0]}" for label, key in SHORT))
    shown.append(f"host {results.run.host}")
    return "\n".join(shown)


@dataclass(frozen=True)
class Difference:
    fact: str
    before: str
    now: str

    @property
    def changed(self) -> bool:
        return self.before != self.now


def differences(before: Results, now: Results) -> list[Difference]:
    """Every fact of either run (an NCCL_* variable set in one only reads 'unset' in the other), this run's
    order first."""
    old, new = environment(before), environment(now)
    keys = [*new, *(k for k in old if k not in new)]
    return [Difference(k, old.get(k, UNSET), new.get(k, UNSET)) for k in keys]
