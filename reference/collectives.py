"""The collectives the reference calls, under their current torch names.

torch 2.13 renamed ``reduce_scatter_tensor`` / ``all_gather_into_tensor`` to
``reduce_scatter_single`` / ``all_gather_single`` (same signatures) and warns
on the old names; older torch has only the old ones. Looked up at call time,
so a test can wrap ``torch.distributed.<name>`` to record launches.
"""

from __future__ import annotations

import torch.distributed as dist

REDUCE_SCATTER = "reduce_scatter_single" if hasattr(dist, "reduce_scatter_single") else "reduce_scatter_tensor"
ALL_GATHER = "all_gather_single" if hasattr(dist, "all_gather_single") else "all_gather_into_tensor"


def reduce_scatter(output, input, **kwargs):
    return getattr(dist, REDUCE_SCATTER)(output, input, **kwargs)


def all_gather(output, input, **kwargs):
    return getattr(dist, ALL_GATHER)(output, input, **kwargs)
