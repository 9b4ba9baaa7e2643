"""Overlap is real: with it, a bucket's collective starts before backward ends; without it, none does.

Observed from outside (``observe``): the collectives come from the recording
group the implementation was handed, whatever launches them (torch's C++
reducer included); a param's grad is ready when a post-accumulate-grad hook
registered after the implementation's own fires. The second step is
observed: upstream dispatches the first step's collectives from
``finish_grad_sync`` while it learns which params get grads.
"""

import pytest

from suites.impls import load_implementation
from suites.multigpu.harness import requires_peers

from .cases import TINY, Case
from .observe import observe_step, requires_observed
from .sides import UnderTest, global_token_count

pytestmark = pytest.mark.requires("ddp")


def check_launch_order(ctx, case: Case) -> None:
    requires_peers(ctx)  # one rank has nothing to exchange, so an implementation may launch nothing at all
    impl = load_implementation(ctx.impl_spec)
    side = UnderTest(case, ctx, impl)
    side.sync(side.backward(0, global_token_count(case, 0, ctx.world_size)))  # warm-up step
    side.zero_grad()
    record = observe_step(side, 1, global_token_count(case, 1, ctx.world_size))
    reductions = requires_observed(record, impl)
    if case.overlap and len(reductions) == 1:
        pytest.skip(f"{impl.name} reduced one step's grads in one collective: with a single bucket there is nothing "
                    "to overlap it with (the suite's bucket size does not reach a factory; declare factory.bucket_size "
                    "or take the configuration)")
    first = min(c.launched_s for c in reductions)
    ready = sorted(record.grads_ready.values())
    if case.overlap:
        # Our hook runs after the implementation's, so the grad whose own hook launched the collective is
        # stamped just after it: another param's grad must follow for the launch to hide anything.
        after = sum(t > first for t in ready)
        assert after >= 2, (
            f"grads ready after the first gradient collective: got {after} of {len(ready)}, but should be at least "
            "2 (the launching grad and another): with overlap it should start while backward still produces grads"
        )
    else:
        early = first - record.backward_returned
        assert early > 0, (
            f"first gradient collective: got launched {-early * 1e3:.3f} ms before backward returned, but should "
            "wait for finish_grad_sync with overlap off"
        )


PROBES = [Case(f"{mode}-{'overlap' if overlap else 'serial'}", policy, overlap=overlap, bucket_size=TINY,
              grad_sync_only=True)
          for mode, policy in (("allreduce", "packed"), ("distopt", "padded")) for overlap in (True, False)]


@pytest.mark.parametrize("case", PROBES, ids=[c.name for c in PROBES])
def test_collectives_launch_during_backward_only_with_overlap(ranks, impl, case):
    ranks.run(check_launch_order, case)
