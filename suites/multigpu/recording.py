"""Recording, from outside an implementation, when it calls its gradient collectives.

The reductions go through ``torch.distributed``'s Python functions, unless the
implementation names other ``(owner, attribute)`` pairs in its
``collective_patch_points`` (megatron-core binds its reduce-scatter at import).
A collective launched from C++ is invisible here.
"""

from __future__ import annotations

import contextlib

import torch.distributed as dist

DEFAULT_PATCH_POINTS = [
    (dist, name) for name in ("all_reduce", "reduce_scatter_tensor", "reduce_scatter_single") if hasattr(dist, name)
]


def patch_points(impl) -> list:
    return list(getattr(impl, "collective_patch_points", DEFAULT_PATCH_POINTS))


@contextlib.contextmanager
def recording_collectives(events: list[str], points):
    """Append "collective" to ``events`` whenever one of the patched functions is called."""
    originals = [(owner, attr, getattr(owner, attr)) for owner, attr in points]

    def recorded(fn):
        def call(*args, **kwargs):
            events.append("collective")
            return fn(*args, **kwargs)
        return call

    for owner, attr, fn in originals:
        setattr(owner, attr, recorded(fn))
    try:
        yield
    finally:
        for owner, attr, fn in originals:
            setattr(owner, attr, fn)
