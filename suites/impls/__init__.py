"""Finding the implementation under test by a registered name or a module path."""

from __future__ import annotations

import importlib

from .protocol import LEVEL_METHODS, Implementation
from .support import check_table, levels
from .wrap import PREFIX, WrappedFactory

REGISTRY: dict[str, str] = {
    "reference": "suites.impls.reference",
    "megatron": "suites.impls.megatron_core",
    "torch": "suites.impls.torch_ddp",
    "torch-static-graph": "suites.impls.torch_ddp:static_graph",
    "torch-bucket-view": "suites.impls.torch_ddp:bucket_view",
    "torch-find-unused": "suites.impls.torch_ddp:find_unused",
    "fsdp2": "suites.impls.fsdp2",
    "fsdp2-no-reshard": "suites.impls.fsdp2:keep_unsharded",
    "fsdp2-hsdp": "suites.impls.fsdp2:hybrid_sharded",
    "replicate": "suites.impls.replicate",
    "deepspeed": "suites.impls.deepspeed",
    "deepspeed-zero1": "suites.impls.deepspeed:zero1",
    "deepspeed-bf16": "suites.impls.deepspeed:bf16_fp32_accumulation",
    "deepspeed-zero3": "suites.impls.deepspeed:zero3",
    "deepspeed-round-robin": "suites.impls.deepspeed:round_robin",
    "deepspeed-offload": "suites.impls.deepspeed:offload",
    "megatron-fsdp": "suites.impls.megatron_fsdp",
    "megatron-fsdp-no-shard": "suites.impls.megatron_fsdp:no_shard",
    "megatron-fsdp-optim": "suites.impls.megatron_fsdp:optim",
    "megatron-fsdp-optim-grads": "suites.impls.megatron_fsdp:optim_grads",
    "megatron-fsdp-optim-grads-units": "suites.impls.megatron_fsdp:optim_grads_units",
}


def load_implementation(spec: str) -> Implementation:
    """``spec`` is a registered name, ``package.module``, ``package.module:attribute`` or ``wrap:…``.

    A module path must expose an object named ``implementation`` (or the named
    attribute) following ``suites.impls.protocol.Implementation``;
    ``wrap:package.module:factory`` makes one from a wrapper factory
    (``suites.impls.wrap``).
    """
    if spec.startswith(PREFIX):
        return WrappedFactory(spec)
    module_name, _, attribute = REGISTRY.get(spec, spec).partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing_module = spec not in REGISTRY and isinstance(exc, ModuleNotFoundError) and \
            exc.name is not None and (module_name + ".").startswith(exc.name + ".")
        if not missing_module:  # it exists, but importing it (or what it imports) failed
            raise ValueError(f"--impl: {spec!r} ({module_name}) failed to import: {type(exc).__name__}: {exc}") \
                from exc
        raise ValueError(
            f"--impl: got {spec!r}, but should be one of {', '.join(REGISTRY)}, an importable "
            f"module path, or wrap:package.module:factory ({exc})"
        ) from exc
    impl = getattr(module, attribute or "implementation", None)
    where = f"{module_name}.{attribute or 'implementation'}"
    missing = [a for a in ("name", "version", "lacks", "unavailable") if not hasattr(impl, a)]
    if impl is None or missing:
        raise ValueError(f"--impl: {where} is {impl!r}, but should be an object following "
                         f"suites.impls.protocol.Implementation (missing: {', '.join(missing)})")
    check_table(impl)
    missing = [m for level in levels(impl) for m in LEVEL_METHODS.get(level, ()) if not hasattr(impl, m)]
    if missing:
        raise ValueError(f"--impl: {where} provides the levels {sorted(levels(impl))}, but lacks their "
                         f"methods {', '.join(missing)} (suites/impls/protocol.py); a level it does not "
                         "provide is a row of its table `lacks`")
    return impl
