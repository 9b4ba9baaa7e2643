"""Hypothesis strategies for the layout suite: models, data-parallel sizes, bucket sizes.

Kept apart from the assertion helpers so a failing example reads as data.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from reference.layout import LayoutConfig, ParamSpec

DTYPES = (torch.float32, torch.bfloat16, torch.float16)

shapes = st.one_of(
    st.tuples(st.integers(1, 5000)),
    st.tuples(st.integers(1, 96), st.integers(1, 96)),
    st.tuples(st.integers(1, 12), st.integers(1, 12), st.integers(1, 12)),
)

# Small dp values, the powers of two real jobs use, and anything up to 1024.
dps = st.one_of(
    st.integers(1, 16),
    st.sampled_from([32, 64, 96, 128, 256, 512, 1000, 1024]),
    st.integers(1, 1024),
)

bucket_sizes = st.one_of(st.none(), st.integers(1, 200), st.integers(1, 60_000))


@st.composite
def models(draw, max_params: int = 12, dtypes=DTYPES, shared: bool = True, experts: bool = False,
           min_shared: int = 0) -> list[ParamSpec]:
    """A model's trainable params in ``parameters()`` order, maybe with shared embeddings (``min_shared``: at
    least that many, anywhere in the order).

    ``experts``: some params are MoE experts' (``expert_parallel``), at least
    one of them and never a shared embedding, interleaved with dense ones.
    """
    n = draw(st.integers(max(2 if experts else 1, min_shared), max_params))
    dtype_choice = st.sampled_from(dtypes)
    flags = st.booleans() if shared and not min_shared else st.just(bool(min_shared))
    # At most two shared embeddings (input and output side), like a tied model.
    shared_at = (set(draw(st.lists(st.integers(0, n - 1), min_size=min_shared, max_size=2, unique=True)))
                 if draw(flags) else set())
    expert_at = set()
    if experts:
        shared_at.discard(n - 1)  # so that at least one param can be an expert's
        candidates = [i for i in range(n) if i not in shared_at]
        expert_at = set(draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=n)))
    return [
        ParamSpec(
            name=f"p{i}",
            shape=draw(shapes),
            dtype=draw(dtype_choice),
            shared_embedding=i in shared_at,
            expert_parallel=i in expert_at,
        )
        for i in range(n)
    ]


@dataclass(frozen=True)
class Setup:
    """Everything of a ``LayoutConfig`` but the policy, which tests get from a fixture."""

    dp: int
    bucket_size: int | None
    grad_reduce_in_fp32: bool
    expert_dp: int | None = None

    def config(self, policy: str) -> LayoutConfig:
        return LayoutConfig(
            dp=self.dp,
            policy=policy,
            bucket_size=self.bucket_size,
            grad_reduce_in_fp32=self.grad_reduce_in_fp32,
            expert_dp=self.expert_dp,
        )


def setups(max_dp: int | None = None):
    dp = dps if max_dp is None else st.integers(1, max_dp)
    return st.builds(Setup, dp=dp, bucket_size=bucket_sizes, grad_reduce_in_fp32=st.booleans())


@st.composite
def expert_setups(draw, max_dp: int | None = None) -> Setup:
    """A setup with an expert-data-parallel size: ``dp = ep * expert_dp`` for some expert-parallel size ep."""
    setup = draw(setups(max_dp))
    ep = draw(st.sampled_from([d for d in range(1, setup.dp + 1) if setup.dp % d == 0]))
    return Setup(setup.dp, setup.bucket_size, setup.grad_reduce_in_fp32, expert_dp=setup.dp // ep)
