"""The one registry of DDP configurations the correctness tests run over (OpInfo style).

Each ``Case`` names a configuration, knows its ``DDPConfig`` and what it
needs of an implementation (``unsupported_by``, which the suite plugin asks
at collection); the generic tests in this directory are parametrized over
``CASES`` and decide from the case how exactly results must match.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import pytest
import torch

from reference.config import DDPConfig

from suites.impls.protocol import ClipsNormTypes, SkipsByNormTypes
from suites.impls.support import provides, why_not

from .models import SHAPES, Shape, batch
from .moe import Topology

TINY, MID = 100, 1000  # elements: many buckets, a few buckets (None: one bucket)

Seeding = Literal["dequantized", "high-precision"]
Moment = Literal["none", "eval", "eval-after-zero", "checkpoint"]
MOMENTS: dict[Moment, str] = {
    "none": "zero_grad right after the step, as a plain training loop",
    "eval": "a forced param gather (evaluation) right after the step, an evaluation forward under no_grad, then "
            "zero_grad and training on",
    "eval-after-zero": "zero_grad first, then the forced gather and the evaluation forward, then training on",
    "checkpoint": "after the step, every param and fp32 master saved through the implementation's state dict and "
                  "loaded into a fresh instance, which trains on in place of the first",
}


@dataclass(frozen=True)
class Case:
    name: str
    policy: str = "packed"
    overlap: bool = True
    bucket_size: int | None = TINY
    average_in_collective: bool = False
    microbatches: int = 1
    bf16: bool = False
    fp32_grads: bool = True
    """With ``bf16``: reduce grads in fp32 (``grad_reduce_in_fp32``), or in bf16 like the params."""
    tied: bool = False
    clip: float | None = None
    clip_reached: bool = True
    """With ``clip``: whether every step's grad norm exceeds it (grads scaled) or stays below it (left alone)."""
    norm_type: float = 2.0
    overlap_param_gather: bool = False
    num_tokens: bool = False
    optimizer: str = "sgd"
    buckets_per_group: int = 1
    steps: int = 3
    seed: int = 7
    grad_sync_only: bool = False
    """Run one backward and grad sync, no optimizer step: only the ddp level is needed."""
    moe: Topology | None = None
    """Train the mixture-of-experts model over this (ep, edp) topology instead of the dense one."""
    instances: int = 1
    """Distributed-optimizer instances (upstream's num_distributed_optimizer_instances)."""
    fp32_reduce_scatter: bool = False
    """Reduce-scatter bf16 grads summing them in fp32 (upstream's reduce_scatter_with_fp32_accumulation)."""
    fp32_local: tuple[str, ...] = ()
    """Params (fnmatch patterns, or "all") accumulating microbatches in an fp32 main_grad of their own."""
    skip_above: float | None = None
    """Skip an optimizer step whose grad norm exceeds this (upstream's grad_norm_skip_threshold)."""
    skip_reached: bool = True
    """With ``skip_above``: whether every step's grad norm exceeds it (every step skipped) or stays below it."""
    force_all_reduce: bool = False
    """Finish the grad sync with finish_grad_sync(force_all_reduce=True): every rank holds every reduced grad."""
    world: int | None = None
    """Ranks the case needs (run in a pool of its own under plain pytest); None: the session's world size."""
    quantized: str | None = None
    """The recipe (fp8, mxfp8) the model's linear weights are held in, gathered so (``fp8_param_gather``)."""
    reuse: bool = False
    """MXFP8 params gathered through the grad buffer's memory (``reuse_grad_buf_for_mxfp8_param_ag``)."""
    shape: str = "base"
    """The models' sizes, a name of ``models.SHAPES``."""
    seeding: Seeding = "dequantized"
    """With ``quantized``: whether the model keeps each quantized param's value at initialization, from which an
    optimizer may seed its fp32 master (``high-precision``), or holds the quantized values only."""
    moment: Moment = "none"
    """What happens between a step and the next ``zero_grad`` (``MOMENTS``)."""
    chain: tuple[str, ...] = ()
    """With experts: the dense and the expert buffers each under an optimizer of its own, in this order
    (``chained_optimizers``); empty: one optimizer over every buffer."""

    @property
    def model_shape(self) -> Shape:
        return SHAPES[self.shape]

    def batch(self, step: int, micro: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A rank's microbatch of this case: its seed, its model's vocabulary, ragged for a per-token loss."""
        return batch(self.seed, step, micro, rank, ragged=self.num_tokens, vocab=self.model_shape.vocab)

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.bf16 else torch.float32

    def ddp_config(self) -> DDPConfig:
        return DDPConfig(
            policy=self.policy,
            bucket_size=self.bucket_size,
            disable_bucketing=self.bucket_size is None,
            overlap_grad_reduce=self.overlap,
            overlap_param_gather=self.overlap_param_gather,
            average_in_collective=self.average_in_collective,
            grad_reduce_in_fp32=self.bf16 and self.fp32_grads,
            calculate_per_token_loss=self.num_tokens,
            buckets_per_group=self.buckets_per_group,
            num_distributed_optimizer_instances=self.instances,
            reduce_scatter_with_fp32_accumulation=self.fp32_reduce_scatter,
            param_name_patterns_for_fp32_local_accumulation=self.fp32_local,
            fp8_param_gather=self.quantized is not None,
            reuse_grad_buf_for_mxfp8_param_ag=self.reuse,
        )

    def runtime_knobs(self) -> list[str]:
        """The upstream knobs (suites/impls/protocol.py KNOBS) this case turns that are no ``DDPConfig``
        field."""
        skips = self.skip_above is not None
        return (["force_all_reduce"] * self.force_all_reduce + ["grad_norm_skip_threshold"] * skips
                + ["chained_optimizers"] * bool(self.chain))

    def unsupported_by(self, impl) -> str | None:
        """Why ``impl`` cannot run this case, or None (``support.why_not``, which the plugin asks)."""
        reason = (why_not(impl, self.ddp_config(), self.runtime_knobs())
                  or (why_not(impl, "expert") if self.moe else None)
                  or (why_not(impl, "checkpoint") if self.moment == "checkpoint" else None))
        if not reason and self.clip is not None and isinstance(impl, ClipsNormTypes) \
                and self.norm_type not in impl.clip_norm_types:
            reason = (f"{impl.name} clips by the {' or '.join(_norm_name(t) for t in sorted(impl.clip_norm_types))} "
                      f"norm only; this case clips by the {_norm_name(self.norm_type)} norm")
        if not reason and self.skip_above is not None and self.clip is not None \
                and isinstance(impl, SkipsByNormTypes) and self.norm_type not in impl.skip_norm_types:
            reason = (f"{impl.name} skips a step by the "
                      f"{' or '.join(_norm_name(t) for t in sorted(impl.skip_norm_types))} norm only; this case "
                      f"clips by the {_norm_name(self.norm_type)} norm")
        if reason or provides(impl, "optimizer"):
            return reason
        stepped = not self.grad_sync_only
        needs = [what for what, used in (
            ("a distributed optimizer", self.policy != "packed" and stepped),
            ("clipping", self.clip is not None and stepped),
            ("num_tokens finalisation", self.num_tokens),
            ("fp32 main params", self.bf16 and stepped),
        ) if used]
        if needs:
            return f"{why_not(impl, 'optimizer')}; this case needs it for {', '.join(needs)}"
        return None

    def bitwise(self, world_size: int) -> bool:
        """docs/rules.md: at world size 2, fp32, gloo's sum is the same however split."""
        return world_size == 2 and not self.bf16 and self.clip is None and not self.num_tokens

    def optimizer_options(self) -> dict:
        """Keywords for ``make_optimizer`` beyond clipping: only the knobs this case turns."""
        options = {} if self.skip_above is None else {"grad_norm_skip_threshold": self.skip_above}
        return options | ({"chained_optimizers": self.chain} if self.chain else {})

    def make_torch_optimizer(self, params):
        if self.optimizer == "adam":
            return torch.optim.Adam(params, lr=1e-2)
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def _norm_name(norm_type: float) -> str:
    return "inf" if norm_type == float("inf") else f"L{norm_type:g}"


def _matrix() -> list[Case]:
    cases = []
    for policy in ("packed", "padded"):
        mode = "allreduce" if policy == "packed" else "distopt"
        for overlap in (True, False):
            for label, size in (("tiny", TINY), ("mid", MID), ("one", None)):
                cases.append(Case(f"{mode}-{'overlap' if overlap else 'serial'}-{label}", policy, overlap, size))
        base = Case(f"{mode}", policy)
        for suffix, change in (
            ("avg-in-collective", dict(average_in_collective=True)),
            ("microbatches", dict(microbatches=3)),
            ("bf16-fp32-grads", dict(bf16=True)),
            ("bf16-grads", dict(bf16=True, fp32_grads=False)),
            ("tied-embedding", dict(tied=True)),
            ("clip", dict(clip=0.05)),
            ("clip-not-reached", dict(clip=100.0, clip_reached=False)),
            ("clip-inf-norm", dict(clip=2e-3, norm_type=float("inf"))),
            ("num-tokens", dict(num_tokens=True)),
            ("adam", dict(optimizer="adam")),
            ("bucket-groups", dict(buckets_per_group=3)),
            ("everything", dict(tied=True, microbatches=2, average_in_collective=True, clip=0.05,
                                optimizer="adam", buckets_per_group=2)),
        ):
            cases.append(dataclasses.replace(base, name=f"{mode}-{suffix}", **change))
    cases += _knob_cases()
    cases += [
        Case("distopt-high-busbw", "high-busbw"),
        # A rank whose shard of a high-busbw bucket is padding only has no grad for the inf norm (megatron-core
        # 0.16.1 raised there; docs/peers.md, F5): found by the nightly search, named here so CI meets it.
        Case("distopt-high-busbw-clip-inf-norm", "high-busbw", clip=2e-3, norm_type=float("inf")),
        Case("distopt-shard-aligned", "shard-aligned", bucket_size=MID),
        Case("distopt-overlap-param-gather", "padded", overlap_param_gather=True),
        Case("distopt-overlap-param-gather-adam-microbatches", "padded", overlap_param_gather=True,
             optimizer="adam", microbatches=2),
    ]
    return cases


def _knob_cases() -> list[Case]:
    """Upstream's newer knobs (docs/rules.md, section 6), each decision with a case on either side of it."""
    bf16 = dict(bf16=True, fp32_grads=False)
    return [
        Case("distopt-2-instances", "padded", instances=2),
        Case("distopt-2-instances-clip-adam", "padded", instances=2, clip=0.05, optimizer="adam"),
        Case("distopt-2-instances-of-2", "padded", instances=2, world=4),
        Case("distopt-2-instances-of-2-avg-in-collective", "padded", instances=2, average_in_collective=True,
             world=4),
        Case("distopt-bf16-fp32-reduce-scatter", "padded", fp32_reduce_scatter=True, **bf16),
        Case("allreduce-fp32-local-all", fp32_local=("all",), microbatches=3, **bf16),
        Case("distopt-fp32-local-weights", "padded", fp32_local=("*.weight",), microbatches=3, **bf16),
        Case("allreduce-skip-every-step", skip_above=0.01),
        Case("distopt-skip-every-step", "padded", skip_above=0.01),
        Case("allreduce-skip-threshold-not-reached", skip_above=100.0, skip_reached=False),
        # Every step skipped where a rank's shards are padding only (megatron-core 0.19.2 hung: docs/peers.md, F6).
        Case("distopt-high-busbw-skip-every-step", "high-busbw", skip_above=0.01),
        Case("distopt-skip-threshold-not-reached", "padded", skip_above=100.0, skip_reached=False),
        Case("distopt-force-all-reduce", "padded", overlap=False, force_all_reduce=True, grad_sync_only=True,
             steps=1),
        Case("distopt-2-instances-of-2-force-all-reduce", "padded", instances=2, overlap=False,
             force_all_reduce=True, grad_sync_only=True, steps=1, world=4),
    ]


def params(cases: list["Case"]) -> list:
    """``cases`` as pytest params named by the case, each on the ranks it needs."""
    return [pytest.param(c, id=c.name, marks=[pytest.mark.world_size(c.world)] if c.world else [])
            for c in cases]


def _expert_matrix() -> list[Case]:
    """Expert parallelism at world size 4 (ep 2 x edp 2) and 2 (ep 2 x edp 1; ep 1 x edp 2)."""
    cases = []
    for topology in (Topology(2, 2), Topology(2, 1), Topology(1, 2)):
        where = f"ep{topology.ep}-edp{topology.edp}"
        for suffix, policy, change in (
            ("allreduce", "packed", {}),
            ("allreduce-avg-in-collective", "packed", dict(average_in_collective=True)),
            ("allreduce-clip", "packed", dict(clip=0.05)),
            ("distopt", "padded", {}),
            ("distopt-avg-in-collective", "padded", dict(average_in_collective=True)),
            ("distopt-clip-adam", "padded", dict(clip=0.05, optimizer="adam")),
        ):
            cases.append(Case(f"moe-{where}-{suffix}", policy, moe=topology, world=topology.world, **change))
    return cases


CASES: list[Case] = _matrix()
BY_NAME = {c.name: c for c in CASES}
EXPERT_CASES: list[Case] = _expert_matrix()
GRAD_SYNC_CASES = [dataclasses.replace(c, grad_sync_only=True, steps=1) for c in CASES]
