"""Adapter for torch's composable ``replicate`` built on FSDP2 (``--impl replicate``).

``torch.distributed._composable.replicate_with_fsdp.replicate`` (torch 2.11
through 2.15; read through ``compat.private_torch``: on a torch without it
the implementation is unavailable, with the reason) is data parallelism on FSDP2's machinery: every param becomes a DTensor
*replicated* over the mesh, and each unit's grads are all-reduced (AVG by
default) right after its backward. Its units are ``FSDPModule``s with FSDP2's
controls (``set_requires_gradient_sync``, ``set_force_sum_reduction_for_comms``,
``set_gradient_divide_factor``), so the FSDP2 adapter (``suites/impls/fsdp2.py``)
runs it unchanged with ``replicate`` in place of ``fully_shard``: the same
units (each direct child owning params, then the root), the same knob mapping,
the ``ddp`` and ``optimizer`` levels. Reduced grads are whole on every rank
(``full_tensor()`` of a replicated DTensor issues no collective).
"""

from __future__ import annotations

from compat.private_torch import replicate

from .fsdp2 import FSDP2Implementation, lacked

LACKS = lacked("replicate", "keeps every param whole on every rank, unpadded",
               "all-reduces a unit's grads right after its backward")

apply, missing = replicate()
implementation = FSDP2Implementation("replicate", apply, LACKS, unavailable=missing)
