"""Overlap is real: with it, a bucket's collective starts before backward ends; without it, none does.

The order is recorded from outside the implementation: a post-accumulate-grad
hook on every param (registered after the implementation's own hooks) logs
"grad", and the collectives the implementation calls log "collective".
"""

import contextlib

import pytest
import torch.distributed as dist

from suites.impls import load_implementation

from .cases import TINY, Case
from .training import Side, global_token_count

pytestmark = pytest.mark.requires("ddp")

COLLECTIVES = ("all_reduce", "reduce_scatter_tensor")


@contextlib.contextmanager
def recording_collectives(events: list[str]):
    originals = {name: getattr(dist, name) for name in COLLECTIVES}

    def wrap(name, fn):
        def recorded(*args, **kwargs):
            events.append("collective")
            return fn(*args, **kwargs)
        return recorded

    for name, fn in originals.items():
        setattr(dist, name, wrap(name, fn))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)


def check_launch_order(ctx, policy: str, overlap: bool) -> list[str]:
    case = Case(f"overlap-probe-{policy}", policy, overlap=overlap, bucket_size=TINY)
    side = Side(case, ctx, load_implementation(ctx.impl_spec))
    events: list[str] = []
    for param in side.model.parameters():
        param.register_post_accumulate_grad_hook(lambda p: events.append("grad"))
    with recording_collectives(events):
        local = side.backward(0, global_token_count(case, 0, ctx.world_size))
        events.append("backward returned")
        side.sync(local)
    first = events.index("collective") if "collective" in events else None
    last_grad = max(i for i, e in enumerate(events) if e == "grad")
    assert first is not None, f"collectives during the step: got none, but should be at least one ({events})"
    if overlap:
        assert first < last_grad, (
            f"first collective at event {first}: got after the last grad (event {last_grad}), but should "
            f"start while backward is still producing grads: {events}"
        )
    else:
        returned = events.index("backward returned")
        assert first > returned, (
            f"first collective at event {first}: got before backward returned (event {returned}), but "
            f"should wait for finish_grad_sync with overlap off: {events}"
        )
    return events


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "serial"])
@pytest.mark.parametrize("policy", ["packed", "padded"], ids=["allreduce", "distopt"])
def test_collectives_launch_during_backward_only_with_overlap(ranks, impl, policy, overlap):
    ranks.run(check_launch_order, policy, overlap)
