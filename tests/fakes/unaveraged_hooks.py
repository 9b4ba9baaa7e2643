"""The worked example with one bug: the reduced grads are summed, never averaged over the group."""

from fixtures.examples.bucketed_hooks import BucketedDDPHooks, GradientBucket


class SummingBucket(GradientBucket):
    def finish(self, world_size: int) -> None:
        super().finish(1)


class UnaveragedHooks(BucketedDDPHooks):
    def __init__(self, module, group=None, bucket_size_mb: float = 25.0) -> None:
        super().__init__(module, group, bucket_size_mb)
        for bucket in self.buckets:
            bucket.__class__ = SummingBucket


def factory(module, group):
    return UnaveragedHooks(module, group, bucket_size_mb=2**-10)
