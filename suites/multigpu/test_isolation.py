"""Two DDPs in one process are independent: the second syncs like torch DDP whatever the first was set up with.

Implementations keep state beside their DDP objects (module-level
functions, caches, process groups). A setting of one instance that leaks
into the next trains a wrong model with no error: a second model in the same
process (an EMA copy, a teacher, the next stage of a pipeline in one
process) silently inherits it. Each check builds a first DDP with a
configuration that changes how it reduces, leaves it unused, then checks a
second one with the plain configuration against torch DDP.
"""

import pytest

from suites.impls import load_implementation
from suites.impls.support import why_not

from .cases import Case, params
from .sides import UnderTest
from .training import first_step_grads_against_torch_ddp

pytestmark = pytest.mark.requires("ddp")

SECOND = Case("distopt-overlap-tiny", "padded", grad_sync_only=True, steps=1)
FIRSTS = [
    Case("distopt-bf16-fp32-reduce-scatter", "padded", bf16=True, fp32_grads=False, fp32_reduce_scatter=True),
    Case("distopt-avg-in-collective", "padded", average_in_collective=True),
    Case("distopt-2-instances", "padded", instances=2),
]


def check_second_ddp_unaffected(ctx, first: Case) -> None:
    impl = load_implementation(ctx.impl_spec)
    UnderTest(first, ctx, impl)  # built, never stepped: only its configuration could reach the second
    first_step_grads_against_torch_ddp(ctx, impl, SECOND)


@pytest.mark.parametrize("first", params(FIRSTS))
def test_a_second_ddp_is_unaffected_by_the_first_ones_configuration(ranks, impl, first):
    reason = why_not(impl, SECOND)
    if reason:
        pytest.skip(reason)
    ranks.run(check_second_ddp_unaffected, first)
