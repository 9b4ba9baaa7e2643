"""The reference implementation, seen through the suite protocol (no translation needed)."""

from __future__ import annotations

import reference
from reference.buffer import ParamAndGradBuffer, build_buffers
from reference.layout import LayoutConfig, ParamSpec, plan_layout

from .protocol import NamedParams


class ReferenceImplementation:
    name = "reference"
    version = reference.__version__
    capabilities = frozenset({"layout", "buffer", "shards", "validation"})
    unavailable = None

    def unsupported(self, config: LayoutConfig) -> str | None:
        return None

    def plan(self, named_params: NamedParams, config: LayoutConfig):
        return plan_layout((ParamSpec.from_parameter(n, p) for n, p in named_params), config).buffers

    def build(
        self, named_params: NamedParams, config: LayoutConfig, device="cpu"
    ) -> list[ParamAndGradBuffer]:
        return build_buffers(named_params, config, device)


implementation = ReferenceImplementation()
