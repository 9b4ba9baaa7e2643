"""An implementation that expresses only the packed policy: tests that need another must skip, naming why."""

from suites.impls.reference import ReferenceImplementation
from suites.impls.support import Lack


class PackedOnly(ReferenceImplementation):
    name = "packed-only-fake"
    lacks = (Lack("policy", "the fake knows no {value!r} policy", when=lambda policy: policy != "packed"),)


implementation = PackedOnly()
