"""An implementation that only plans: buffer- and shard-level tests must skip, not pass."""

from suites.impls.protocol import CAPABILITIES
from suites.impls.reference import ReferenceImplementation
from suites.impls.support import Lack


class LayoutOnly(ReferenceImplementation):
    name = "layout-only-fake"
    lacks = tuple(Lack(level, "the fake only plans") for level in CAPABILITIES if level != "layout")


implementation = LayoutOnly()
