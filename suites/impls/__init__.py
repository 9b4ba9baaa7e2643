"""Finding the implementation under test by a registered name or a module path."""

from __future__ import annotations

import importlib

from .protocol import CAPABILITIES, LEVEL_METHODS, Implementation
from .wrap import PREFIX, WrappedFactory

REGISTRY: dict[str, str] = {
    "reference": "suites.impls.reference",
    "megatron": "suites.impls.megatron_core",
    "torch": "suites.impls.torch_ddp",
    "fsdp2": "suites.impls.fsdp2",
    "replicate": "suites.impls.replicate",
    "deepspeed": "suites.impls.deepspeed",
    "deepspeed-zero1": "suites.impls.deepspeed:zero1",
    "deepspeed-zero3": "suites.impls.deepspeed:zero3",
    "deepspeed-round-robin": "suites.impls.deepspeed:round_robin",
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
        raise ValueError(
            f"--impl: got {spec!r}, but should be one of {', '.join(REGISTRY)}, an importable "
            f"module path, or wrap:package.module:factory ({exc})"
        ) from exc
    impl = getattr(module, attribute or "implementation", None)
    required = ["name", "version", "capabilities", "unavailable", "unsupported"]
    for level in getattr(impl, "capabilities", ()):
        required += LEVEL_METHODS.get(level, ())
    missing = [a for a in required if not hasattr(impl, a)]
    if impl is None or missing:
        raise ValueError(
            f"--impl: {module_name}.{attribute or 'implementation'} is {impl!r}, but should be an "
            f"object following suites.impls.protocol.Implementation (missing: {', '.join(missing)})"
        )
    unknown = set(impl.capabilities) - set(CAPABILITIES)
    if unknown:
        raise ValueError(
            f"{impl.name}.capabilities: got unknown levels {sorted(unknown)}, but should be drawn "
            f"from {', '.join(CAPABILITIES)}"
        )
    return impl
