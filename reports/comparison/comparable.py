"""Which runs may be compared: the same backend and tensor device, world size, launch mode, node count, devices
and smoke mode.

A figure measured on eight GPUs over NVLink says nothing about one measured
on two CPU ranks over gloo, and a busbw that halves when a node loses its
NVSwitch is the hardware's doing, not the code's. So a run records its
*setup*, and the gate compares a run only with an earlier run of the same
setup; runs of another setup are named as not comparable, with what differs,
and never gated against. The trend draws one series per setup.

Runs written before the setup was recorded (schemas 1 and 2) have it derived
from what they did record: the run's backend, world size, mode and smoke
flag, and the devices of the nodes (GPU names, or the CPU model); their
method is the one before it was recorded (``EARLIER_METHOD``). Where the
tensors lived was recorded later still: a setup without it had them on CUDA
under NCCL and on the CPU under gloo, the only pairs there were then (gloo
over CUDA tensors, ranks sharing GPUs, is a setup of its own).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ranks.groups import tensors_of

from ..store.runs import RunError, load_results, run_names

SETUP_FIELDS = ("backend", "tensors", "world_size", "mode", "nodes", "devices", "smoke", "method")
METHOD = 4
"""How the benchmarks measure; raised whenever a figure is taken differently (4: rounds calibrated to targets,
impossible and noise-bound figures refused)."""
EARLIER_METHOD = 2  # every run written before the method was recorded (schemas 1 and 2)


def node_devices(node: dict) -> str:
    """What a node computes on: its GPUs by name and count, or its CPU model."""
    gpus = node.get("devices") or []
    if gpus:
        names = sorted(set(gpus))
        return ", ".join(f"{gpus.count(n)} x {n}" for n in names)
    return f"cpu: {(node.get('host') or {}).get('cpu_model', 'unknown')}"


def run_setup(run: dict, nodes: Sequence[dict]) -> dict:
    """The setup of a run from its ``run`` record and its nodes (what a new run writes)."""
    return {
        "backend": run.get("backend"),
        "tensors": run.get("tensors") or tensors_of(run.get("backend")),
        "world_size": run.get("world_size"),
        "mode": run.get("mode"),
        "nodes": max(1, len(nodes)),
        "devices": sorted({node_devices(n) for n in nodes}) or ["unknown"],
        "smoke": bool(run.get("smoke")),
        "method": METHOD,
    }


def setup_of(results: dict) -> dict:
    """A run's setup: recorded (schema 3 on), else derived from its run record and nodes."""
    run = results.get("run") or {}
    recorded = run.get("setup")
    if isinstance(recorded, dict) and set(SETUP_FIELDS) - {"tensors"} <= set(recorded):
        return {**{k: recorded.get(k) for k in SETUP_FIELDS}, "tensors": recorded.get("tensors")
                or tensors_of(recorded.get("backend"))}
    nodes = results.get("nodes") or []
    if not nodes and isinstance(results.get("hardware"), dict):  # schema 2: rank 0's host only
        hw = results["hardware"]
        nodes = [{"devices": [d["name"] for d in hw.get("torch", {}).get("devices", [])], "host": hw.get("host")}]
    return {**run_setup(run, nodes), "method": EARLIER_METHOD}


def setup_label(setup: dict) -> str:
    """One line naming a setup, e.g. 'nccl, 8 ranks, torchrun, 1 node, 8 x NVIDIA H100'; a backend whose tensors
    are not where it usually keeps them is named with them: 'gloo over cuda'."""
    nodes = setup["nodes"]
    method = f", method {setup['method']}" if setup["method"] != METHOD else ""
    backend = setup["backend"]
    if setup.get("tensors") and setup["tensors"] != tensors_of(backend):
        backend = f"{backend} over {setup['tensors']}"
    return (f"{backend}, {setup['world_size']} rank{'s' if setup['world_size'] != 1 else ''}, "
            f"{setup['mode']}, {nodes} node{'s' if nodes != 1 else ''}, {'; '.join(setup['devices'])}"
            f"{', smoke' if setup['smoke'] else ''}{method}")


def differences(old: dict, new: dict) -> list[str]:
    """What differs between two setups, one phrase per field: 'backend gloo -> nccl'."""
    return [f"{field} {_show(old[field])} -> {_show(new[field])}" for field in SETUP_FIELDS if old[field] != new[field]]


def why_not_comparable(old_results: dict, new_results: dict) -> str | None:
    """None when the two runs share a setup, else what differs."""
    diff = differences(setup_of(old_results), setup_of(new_results))
    return "; ".join(diff) if diff else None


def _show(value) -> str:
    return "; ".join(value) if isinstance(value, list) else str(value)


def previous_comparable(root: Path, name: str, results: dict) -> tuple[Path | None, list[str]]:
    """The newest run before ``name`` with the setup of ``results``, and a line for each newer one passed over
    (another setup, or unreadable)."""
    passed = []
    for earlier in reversed([n for n in run_names(root) if n < name]):
        try:
            old = load_results(Path(root) / earlier)
        except RunError as exc:
            passed.append(f"{earlier}: cannot be read ({exc})")
            continue
        why = why_not_comparable(old, results)
        if why is None:
            return Path(root) / earlier, passed
        passed.append(f"{earlier}: another setup ({why})")
    return None, passed
