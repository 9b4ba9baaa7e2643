"""Which runs may be compared: the same setup (``reports.store.model.Setup``: backend and tensor device, world
size, launch mode, node count, devices, smoke mode and method).

A figure measured on eight GPUs over NVLink says nothing about one measured
on two CPU ranks over gloo, and a busbw that halves when a node loses its
NVSwitch is the hardware's doing, not the code's. So a run records its
setup, and the gate compares a run only with an earlier run of the same
setup; runs of another setup are named as not comparable, with what differs,
and never gated against. The trend draws one series per setup.
"""

from __future__ import annotations

from pathlib import Path

from ..store.model import Results
from ..store.runs import load_results, run_names


def why_not_comparable(old: Results, new: Results) -> str | None:
    """None when the two runs share a setup, else what differs."""
    diff = old.run.setup.differences(new.run.setup)
    return "; ".join(diff) if diff else None


def previous_comparable(root: Path, name: str, results: Results) -> tuple[tuple[str, Results] | None, list[str]]:
    """The newest run before ``name`` with the setup of ``results`` (its name and results), and a line for each
    newer one passed over because its setup differs.

    A run that cannot be read on the way is a ``RunError``: it may be the very run this one should be compared
    with, so passing over it would let a malformed run pass the gate."""
    passed = []
    for earlier in reversed([n for n in run_names(root) if n < name]):
        old = load_results(Path(root) / earlier)
        why = why_not_comparable(old, results)
        if why is None:
            return (earlier, old), passed
        passed.append(f"{earlier}: another setup ({why})")
    return None, passed
