"""An implementation that expresses only the packed policy: tests that need another must skip, naming why."""

from suites.impls.reference import ReferenceImplementation


class PackedOnly(ReferenceImplementation):
    name = "packed-only-fake"

    def unsupported(self, config) -> str | None:
        if config.policy != "packed":
            return f"the fake knows no {config.policy!r} policy"
        return None


implementation = PackedOnly()
