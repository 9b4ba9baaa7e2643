"""Known faults below the implementations (in a collective library), marked where a case would meet them.

NCCL before 2.29.7 leaves trailing elements unwritten when it reduces with
AVG (or PreMulSum) over a one-rank communicator (NVIDIA/nccl#1950). A case
that averages in the collective meets it wherever a group it reduces over has
one rank: every group at world size 1, the expert-data-parallel group of an
``edp = 1`` topology. The reference issues no collective over one rank; other
implementations may, and then fail through no fault of their own, so the
test is expected to fail there (not strictly: an implementation that avoids
the collective passes).
"""

from __future__ import annotations

NCCL_AVG_FIXED = (2, 29, 7)
IMMUNE = ("reference",)  # issues no collective over a one-rank group (reference/bucket_group.py)


def nccl_version() -> tuple[int, ...] | None:
    import torch

    try:
        return tuple(int(v) for v in torch.cuda.nccl.version()[:3])
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return None


def avg_over_one_rank(case, world_size: int, backend: str, version: tuple[int, ...] | None) -> str | None:
    """Why ``case`` may fail on this NCCL through NVIDIA/nccl#1950, or None."""
    if backend != "nccl" or not getattr(case, "average_in_collective", False):
        return None
    if version is not None and version >= NCCL_AVG_FIXED:
        return None
    one_rank = world_size == 1 or (case.moe is not None and case.moe.edp == 1)
    if not one_rank:
        return None
    shown = ".".join(map(str, version)) if version else "unknown"
    return (f"NCCL {shown} < 2.29.7 leaves trailing elements unwritten in an AVG over a one-rank group "
            "(NVIDIA/nccl#1950), which this case reduces over")
