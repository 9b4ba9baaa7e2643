"""``finalize_model_grads`` with ``num_tokens``: grads divided by the count summed over ranks.

Upstream divides only when that sum is positive (megatron-core's
``finalize_model_grads``: ``if num_tokens > 0``): a step whose microbatches
held no token at all leaves the grads as reduced, where a bare ``1 / total``
would raise or fill them with inf. Both sides of that boundary are checked.
"""

import pytest
import torch

from suites.impls import load_implementation

from .cases import Case
from .bounds import agreed, assert_close, tolerance
from .sides import UnderTest

pytestmark = pytest.mark.requires("optimizer")

CASES = [Case("allreduce-num-tokens", num_tokens=True, grad_sync_only=True),
         Case("distopt-num-tokens", "padded", num_tokens=True, grad_sync_only=True)]
TOKENS = {  # name: this rank's token count, by rank
    "no-token-anywhere": lambda rank: 0,
    "one-token-on-rank-0": lambda rank: int(rank == 0),
    "three-per-rank": lambda rank: 3,
}


def finalized_grads(ctx, impl, case: Case, tokens: int | None) -> dict[str, torch.Tensor]:
    """Step 0's backward of a summed loss, then finalize with this rank's ``tokens`` (None: no normalisation)."""
    ours = UnderTest(case, ctx, impl)
    ours.backward(step=0, global_tokens=0)  # the global count only rescales the torch DDP side
    count = None if tokens is None else torch.tensor(tokens, dtype=torch.int64, device=ctx.device)
    impl.finalize_model_grads([ours.ddp], count)
    return {name: got.detach().clone() for name, got, _ in ours.reduced_grads()}


def check_num_tokens_divides_when_positive(ctx, case: Case, tokens_of: str) -> None:
    impl = load_implementation(ctx.impl_spec)
    raw = finalized_grads(ctx, impl, case, None)
    scaled = finalized_grads(ctx, impl, case, TOKENS[tokens_of](ctx.rank))
    total = sum(TOKENS[tokens_of](r) for r in range(ctx.world_size))

    def compare() -> None:
        for name, got in scaled.items():
            want = raw[name] / total if total > 0 else raw[name]
            assert_close(got, want, tolerance(total <= 1, False),
                         f"rank {ctx.rank} grad of {name} with {total} tokens in all "
                         f"(raw grad / {max(total, 1)})")
    agreed(ctx, compare)


@pytest.mark.parametrize("tokens_of", list(TOKENS))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_num_tokens_divides_grads_when_positive(ranks, impl, case, tokens_of):
    ranks.run(check_num_tokens_divides_when_positive, case, tokens_of)
