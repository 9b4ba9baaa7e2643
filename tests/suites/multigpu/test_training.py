"""The two sides of suites/multigpu/sides.py behind one interface: one loop trains both, not asking which.

The implementation under test (the reference here) and the torch DDP oracle train a per-token-loss case over
microbatches, where the two sides differ most (torch DDP averages over ranks, so its side rescales its
loss); their params must end up the same. An oracle that forgets to rescale is caught.
"""

import pytest

from suites.impls import load_implementation
from suites.multigpu.cases import BY_NAME
from suites.multigpu.models import loss_fn
from suites.multigpu.sides import Side, TorchDDPOracle, UnderTest, global_token_count

CASE = BY_NAME["allreduce-num-tokens"]


class UnscaledOracle(TorchDDPOracle):
    """torch DDP's side with the plain per-token sum: it averages over ranks what should be summed."""

    def loss(self, logits, labels, global_tokens):
        return loss_fn(logits, labels, "sum") / global_tokens


def check_one_loop_trains_both(ctx, oracle_cls: str) -> float:
    """The largest param difference between the sides after the case's steps, each run through ``Side``
    alone."""
    sides: list[Side] = [UnderTest(CASE, ctx, load_implementation("reference")),
                         ORACLES[oracle_cls](CASE, ctx)]
    for step in range(CASE.steps):
        total = global_token_count(CASE, step, ctx.world_size)
        for side in sides:
            side.sync(side.backward(step, total))
            side.step()
            side.zero_grad()
    ours, theirs = (side.params() for side in sides)
    return max(float((ours[name] - theirs[name]).detach().abs().max()) for name in theirs)


ORACLES = {"torch": TorchDDPOracle, "unscaled": UnscaledOracle}


def test_both_sides_train_the_same_model(ranks):
    diffs = ranks.run(check_one_loop_trains_both, "torch")
    assert max(diffs) < 1e-5, f"max |param difference| per rank: got {diffs}, but should be below 1e-5"


def test_an_oracle_that_does_not_rescale_its_loss_is_caught(ranks):
    if ranks.world_size < 2:
        pytest.skip(f"with one rank an average over ranks is the sum, got world size {ranks.world_size}")
    diffs = ranks.run(check_one_loop_trains_both, "unscaled")
    assert min(diffs) > 1e-4, f"max |param difference| per rank: got {diffs}, but should be well above 1e-5"
