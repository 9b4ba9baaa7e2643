"""An implementation that only plans: buffer- and shard-level tests must skip, not pass."""

from suites.impls.reference import ReferenceImplementation


class LayoutOnly(ReferenceImplementation):
    name = "layout-only-fake"
    capabilities = frozenset({"layout"})


implementation = LayoutOnly()
