"""Overlap is real: with it, a bucket's collective starts before backward ends; without it, none does.

The order is recorded from outside the implementation: a post-accumulate-grad
hook on every param (registered after the implementation's own hooks) logs
"grad", and the collectives the implementation calls log "collective". The
second step is recorded: upstream dispatches the first step's collectives
from ``finish_grad_sync`` while it learns which params get grads.
"""

import pytest

from suites.impls import load_implementation
from suites.multigpu.harness import requires_peers

from .cases import TINY, Case
from .recording import patch_points, recording_collectives
from .training import Side, global_token_count

pytestmark = pytest.mark.requires("ddp")

def check_launch_order(ctx, case: Case) -> list[str]:
    requires_peers(ctx)  # one rank has nothing to exchange, so an implementation may launch nothing at all
    overlap = case.overlap
    impl = load_implementation(ctx.impl_spec)
    side = Side(case, ctx, impl)
    side.sync(side.backward(0, global_token_count(case, 0, ctx.world_size)))  # warm-up step
    side.zero_grad()
    events: list[str] = []
    for param in side.model.parameters():
        param.register_post_accumulate_grad_hook(lambda p: events.append("grad"))
    with recording_collectives(events, patch_points(impl)):
        local = side.backward(1, global_token_count(case, 1, ctx.world_size))
        events.append("backward returned")
        side.sync(local)
    first = events.index("collective") if "collective" in events else None
    last_grad = max(i for i, e in enumerate(events) if e == "grad")
    assert first is not None, f"collectives during the step: got none, but should be at least one ({events})"
    if overlap:
        # Our hook runs after the implementation's, so the grad whose own hook launched the collective
        # is logged just after it: another param's grad must follow for the launch to hide anything.
        grads_after = events[first:].count("grad")
        assert first < last_grad and grads_after >= 2, (
            f"grads after the first collective (event {first}): got {grads_after}, but should be at least 2 "
            f"(the launching grad and another): it should start while backward still produces grads: {events}"
        )
    else:
        returned = events.index("backward returned")
        assert first > returned, (
            f"first collective at event {first}: got before backward returned (event {returned}), but "
            f"should wait for finish_grad_sync with overlap off: {events}"
        )
    return events


PROBES = [Case(f"{mode}-{'overlap' if overlap else 'serial'}", policy, overlap=overlap, bucket_size=TINY,
              grad_sync_only=True)
          for mode, policy in (("allreduce", "packed"), ("distopt", "padded")) for overlap in (True, False)]


@pytest.mark.parametrize("case", PROBES, ids=[c.name for c in PROBES])
def test_collectives_launch_during_backward_only_with_overlap(ranks, impl, case):
    ranks.run(check_launch_order, case)
