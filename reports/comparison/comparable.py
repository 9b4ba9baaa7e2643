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

from ..store.model import Results
from ..store.runs import Runs


def why_not_comparable(old: Results, new: Results) -> str | None:
    """None when the two runs share a setup, else what differs."""
    diff = old.run.setup.differences(new.run.setup)
    return "; ".join(diff) if diff else None


def previous_comparable(runs: Runs, results: Results) -> tuple[Results | None, list[str]]:
    """The newest run before ``results`` with its setup, and a line for each newer one passed over because its
    setup differs.

    A run that cannot be read on the way is a ``RunError``: it may be the very run this one should be compared
    with, so passing over it would let a malformed run pass the gate."""
    passed = []
    for earlier in reversed([n for n in runs.names() if n < results.run.name]):
        old = runs.load(earlier)
        why = why_not_comparable(old, results)
        if why is None:
            return old, passed
        passed.append(f"{earlier}: another setup ({why})")
    return None, passed
