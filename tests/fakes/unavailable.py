"""An implementation that cannot run here: every suite test must skip, naming why."""

from suites.impls.reference import ReferenceImplementation


class Unavailable(ReferenceImplementation):
    name = "unavailable-fake"
    unavailable = "the fake peer library is not installed"


implementation = Unavailable()
