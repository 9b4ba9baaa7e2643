"""Adapter for DeepSpeed ZeRO, one registered name per stage (``STAGES``).

``--impl deepspeed`` is ZeRO-2, ``deepspeed-zero1`` ZeRO-1, ``deepspeed-zero3``
ZeRO-3 with every param partitioned (``STAGE_OPTIONS``), and
``deepspeed-round-robin`` ZeRO-2 with ``round_robin_gradients`` and
``deepspeed-offload`` ZeRO-2 with its optimizer on the CPU, each kept for a
known upstream bug (docs/peers.md). Each is a ``DeepSpeedImplementation`` at
the ``ddp`` and ``optimizer`` levels; no file of DeepSpeed is changed, and
DeepSpeed 0.19.8 runs on CPU and gloo as shipped.

``ddp``
    ``wrap`` returns a handle whose engine ``deepspeed.initialize`` builds on
    the first forward or in ``make_optimizer``, whichever comes first: DeepSpeed
    takes the optimizer and the clipping at initialisation. Without an
    optimizer level call (the ddp-level checks, the overlap benchmark) a
    stand-in SGD with lr 0 fills the slot: nothing there steps. ``loss.backward()``
    runs ZeRO's own hooks (the engine registers hooks on the forward's output).
    ``no_sync`` opens DeepSpeed's ``engine.coalesce_grad_reduction()`` and keeps
    it open until ``finish_grad_sync``: grads accumulate locally in
    ``param.grad`` and are reduced once, at the flush (DeepSpeed's own
    ``no_sync`` asserts under ZeRO-2/3). Reduced grads are read with
    ``deepspeed.utils.safe_get_full_grad`` and ZeRO-3's partitioned params with
    ``safe_get_full_fp32_param``, each a collective, through ``agreed_read``
    so that an error on one rank fails every rank.
``optimizer``
    the ZeRO optimizer DeepSpeed builds around the suite's torch optimizer
    (``zero_allow_untested_optimizer``), fp32 master partitions for bf16
    params, DeepSpeed's L2 ``gradient_clipping`` (0 without clipping: its
    default is 1.0) and its global norm; per-token losses reduce with
    ``gradient_allreduce_op = "sum"`` and ``finalize_model_grads`` divides the
    reduced grads by the token count (``safe_set_full_grad``).

Mapped: ``bucket_size`` → ``reduce_bucket_size`` and ``allgather_bucket_size``
(elements in both; one bucket: the model's size), ``overlap_grad_reduce`` →
``overlap_comm``, bf16 params → ``bf16.enabled`` with ``communication_data_type``
bf16. Its table ``lacks`` names the rest, with what ZeRO does instead; among
them ``grad_reduce_in_fp32``: ``communication_data_type`` fp32 sums in fp32 but
rounds the sums back into the bf16 grads. ``gradient_accumulation_steps`` stays 1: the
suites sum microbatch grads (``no_sync``), where DeepSpeed's accumulation
divides each microbatch by the step count.

Kept out: DeepSpeed's first ``initialize`` JIT-compiles a shared-memory C++
op (``deepspeed_shm_comm``, minutes) that only ``inference_all_reduce``
(tensor-parallel inference) uses. The adapter marks it incompatible in
DeepSpeed's own cache of op compatibility (``deepspeed.ops.__compatible_ops__``)
before ``initialize``, so ``comm/torch.py``'s ``build_shm_op`` returns None and
nothing is compiled. DeepSpeed reads ``LOCAL_RANK`` from the environment
(``runtime/engine.py``); where the launcher set none (plain-mode workers),
the adapter sets the device index (0 on a CPU, where DeepSpeed does not use it).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import logging
import os

import torch
import torch.distributed as dist

from reference.config import DDPConfig
from reference.process_groups import new_group

from .agreed_read import COLLECTIVES, TORCH_POINTS, read_on_every_rank
from .forwarding import GradsInParamsDDP
from .support import Declared, Lack, no_checkpoint, refuse_unsupported, unmapped
from .wrap import packed_records

SHM_OP = "deepspeed_shm_comm"
STAGES = {2: "deepspeed", 1: "deepspeed-zero1", 3: "deepspeed-zero3"}


PARTITIONING = {
    1: "flattens each param group into one buffer padded only to split evenly over the data-parallel ranks",
    2: "flattens each param group into one buffer padded only to split evenly over the data-parallel ranks",
    3: "splits each param evenly over the data-parallel ranks, padding its last partition",
}


def _common_lacks(stage: int) -> tuple[Lack, ...]:
    no_buffer = f"ZeRO-{stage} {PARTITIONING[stage]}: no Megatron-style bucketed buffer"
    return (
        Lack("layout", no_buffer),
        Lack("buffer", no_buffer),
        Lack("shards", no_buffer),
        Lack("validation", "DeepSpeed asserts rather than raising errors that name the field"),
        no_checkpoint(f"ZeRO-{stage}"),
        Lack("expert", "DeepSpeed's MoE groups are its own: the adapter hands it no expert-data-parallel "
                       "group"),
        *unmapped((), "the adapter maps none of upstream's newer knobs onto DeepSpeed's config"),
        Lack("policy", f"ZeRO-{stage} {PARTITIONING[stage]}; it has no bucket padding policy (its gathered "
                       "full grads are checked under 'packed')", when=lambda policy: policy != "packed"),
        Lack("average_in_collective", "ZeRO scales each bucket by 1/dp around a SUM all-reduce "
                                      "(gradient_predivide_factor only moves that scaling); it never reduces "
                                      "with AVG"),
        Lack("buckets_per_group", "ZeRO launches each reduce bucket (reduce_bucket_size elements) on its own",
             when=lambda n: n != 1),
        Lack("check_for_nan_in_grad", "ZeRO has no check naming a param with NaN grads (its overflow check "
                                      "serves fp16 loss scaling)"),
        Lack("grad_reduce_in_fp32", "ZeRO's grads stay in the params' dtype: microbatches add up in the bf16 "
                                    "param.grad, and communication_data_type fp32 sums in fp32 but copies the "
                                    "sums back into the bf16 grads (deepspeed 0.19.8 runtime/zero/"
                                    "stage_1_and_2.py:1511-1512), so no grad is ever fp32"),
    )


STAGE_LACKS = {
    1: (Lack("overlap_grad_reduce=True",
             "ZeRO-1 reduces every grad in one pass after the last grad of backward (runtime/engine.py "
             "allreduce_gradients); nothing overlaps"),),
    2: (Lack("overlap_grad_reduce=False",
             "ZeRO-2 reduces each bucket as soon as it fills during backward, with or without overlap_comm "
             "(which only moves the reduction to a side stream)"),),
    3: (Lack("overlap_grad_reduce=False",
             "ZeRO-3 reduce-scatters each bucket as soon as it fills during backward"),
        Lack("calculate_per_token_loss",
             "ZeRO-3 always averages over the data-parallel ranks: DeepSpeed refuses "
             "gradient_allreduce_op='sum' with stage 3 (runtime/config.py:694-696)")),
}


# DeepSpeed's default keeps params under 1e5 elements whole (all of the suites' small models): 0 partitions each.
STAGE_OPTIONS = {3: {"stage3_param_persistence_threshold": 0}}


class DeepSpeedDDP(GradsInParamsDDP):
    """A module under a DeepSpeed engine (built lazily: DeepSpeed takes the optimizer at initialisation)."""

    def __init__(self, impl: "DeepSpeedImplementation", module, config: DDPConfig, group, agreement_group) -> None:
        super().__init__(None, module, packed_records(module), source="grad")
        self.impl, self.config, self.group, self.agreement_group = impl, config, group, agreement_group
        self._accumulation: contextlib.ExitStack | None = None
        self._substitutes: dict[str, object] = {}  # what DeepSpeed put into torch.nn.functional (ZeRO-3: linear)

    @property
    def engine(self):
        if self.raw is None:
            self.start(_stand_in_optimizer)
        return self.raw

    def start(self, make_optimizer, max_grad_norm: float | None = None) -> None:
        if self.raw is not None:
            raise RuntimeError(
                "make_optimizer: got a call after the engine was built (first forward or an earlier "
                "make_optimizer), but DeepSpeed takes the optimizer in deepspeed.initialize: call it once, "
                "before the first forward"
            )
        torch_own = vars(torch.nn.functional).copy()
        self.raw = self.impl.initialize(self.module, self.config, make_optimizer, max_grad_norm, self.group)
        self._substitutes = {name: value for name, value in vars(torch.nn.functional).items()
                             if torch_own.get(name) is not value}
        _set_functional(torch_own, self._substitutes)

    def __call__(self, *args, **kwargs):
        engine = self.engine
        with self.computing():
            return engine(*args, **kwargs)

    @contextlib.contextmanager
    def computing(self):
        """DeepSpeed's substitutes in ``torch.nn.functional`` (ZeRO-3's linear), as in the engine's forward
        (``protocol.ComputesWith``)."""
        torch_own = {name: getattr(torch.nn.functional, name) for name in self._substitutes}
        _set_functional(self._substitutes, self._substitutes)
        try:
            yield
        finally:
            _set_functional(torch_own, self._substitutes)

    @contextlib.contextmanager
    def no_sync(self):
        """Grads stay local until ``finish_grad_sync``, which reduces them in one pass; through the engine's
        boundary, the backward after the last ``no_sync`` is the boundary, which reduces them."""
        if self.impl.boundary:
            self.engine.set_gradient_accumulation_boundary(False)
            try:
                yield
            finally:
                self.engine.set_gradient_accumulation_boundary(True)
            return
        if self._accumulation is None:
            stack = contextlib.ExitStack()
            stack.enter_context(self.engine.coalesce_grad_reduction())
            self._accumulation = stack
        yield

    def reduced_grads(self, named):
        reads = [(name, functools.partial(_full_grad, param)) for name, param in named]
        return read_on_every_rank(reads, self.agreement_group, collective_points())

    def whole_params(self) -> dict[str, torch.Tensor]:
        """ZeRO-3's partitioned params gathered (``safe_get_full_fp32_param``, agreed), in their own dtype;
        ZeRO-1/2 keep every param whole on every rank."""
        named = list(self.module.named_parameters())
        if self.impl.stage != 3:
            return dict(named)
        reads = [(name, functools.partial(_full_param, param)) for name, param in named]
        wholes = read_on_every_rank(reads, self.agreement_group, collective_points(), what="ZeRO-3 params")
        return {name: whole.to(param.dtype) for (name, param), whole in zip(named, wholes)}

    def set_reduced_grads(self, named, grads) -> None:
        from deepspeed.utils import safe_set_full_grad

        for (_, param), grad in zip(named, grads):
            safe_set_full_grad(param, grad)
        self._forget()

    def finish_grad_sync(self) -> None:
        """Flush an accumulation; ZeRO has reduced everything else before backward returned."""
        if self._accumulation is not None:
            stack, self._accumulation = self._accumulation, None
            stack.close()
        self._forget()

    def zero_grad_buffer(self) -> None:
        self.finish_grad_sync()
        if self.raw is not None:
            self.raw.zero_grad()
        super().zero_grad_buffer()

    def _forget(self) -> None:
        """Drop the suites' views: local ``main_grad`` aliases and the cached reduced grads."""
        for param in self.named.values():
            if hasattr(param, "main_grad"):
                del param.main_grad
        for buf in self.buffers:
            buf.forget()


def _set_functional(source: dict, names) -> None:
    """``torch.nn.functional``'s entries ``names`` taken from ``source``.

    ZeRO-3's initialisation replaces ``torch.nn.functional.linear`` for the
    whole process and never puts it back (DeepSpeed says so: "This will
    persist unless manually reset"). Every other model of the process, the
    suites' torch DDP oracle and later checks among them, would then run
    DeepSpeed's linear, whose one autograd node changes the order in which
    grads arrive. The adapter keeps the substitute to the engine's own forward.
    """
    for name in names:
        setattr(torch.nn.functional, name, source[name])


class DeepSpeedOptimizer:
    """The ZeRO optimizer inside the engine: ``engine.step()``, DeepSpeed's norm when clipping."""

    def __init__(self, ddp: DeepSpeedDDP, make_optimizer, max_grad_norm: float | None) -> None:
        ddp.start(make_optimizer, max_grad_norm)
        self.ddp, self.max_grad_norm = ddp, max_grad_norm

    def step(self) -> float | None:
        self.ddp.engine.step()
        return float(self.ddp.engine.get_global_grad_norm()) if self.max_grad_norm is not None else None

    def zero_grad(self) -> None:
        self.ddp.zero_grad_buffer()

    def count_zeros(self) -> int:
        """Zero elements of the full reduced grads, which every rank reads whole (no padding in them)."""
        return sum(int((buf.grad_data == 0).sum()) for buf in self.ddp.buffers)


def collective_points() -> list:
    """torch.distributed's collectives, and deepspeed.comm's: its backend binds some of torch's at start-up
    (ZeRO-3's reduce-scatter and all-gather go through the bound ones, out of torch.distributed's sight)."""
    from deepspeed import comm

    return TORCH_POINTS + [(comm, name) for name in (*COLLECTIVES, "reduce_scatter_fn") if hasattr(comm, name)]


class DeepSpeedImplementation(Declared):
    def __init__(self, stage: int, zero_options: dict | None = None, name: str | None = None,
                 expectations: str | None = None, engine_options: dict | None = None,
                 lacks: tuple[Lack, ...] | None = None, boundary: bool = False) -> None:
        """``zero_options`` join the config's ``zero_optimization``, ``engine_options`` its top level; ``lacks``
        replaces the stage's table; ``boundary``: microbatches accumulate through the engine's own boundary
        (``set_gradient_accumulation_boundary``), else in one coalesced reduction."""
        if stage not in STAGE_LACKS:
            raise ValueError(f"stage: got {stage!r}, but should be one of {sorted(STAGE_LACKS)}")
        self.stage = stage
        self.zero_options = dict(zero_options or {})
        self.engine_options = dict(engine_options or {})
        self.name = name or STAGES[stage]
        self.expectations = expectations or self.name  # fixtures/expectations/<this>.toml
        self.lacks = STAGE_LACKS[stage] + _common_lacks(stage) if lacks is None else lacks
        self.boundary = boundary
        try:
            self.version = importlib.metadata.version("deepspeed")
            import deepspeed  # noqa: F401
        except Exception as exc:  # not installed, or broken against this torch
            self.version = "not installed"
            self.unavailable = (f"deepspeed cannot be imported ({type(exc).__name__}: {exc}); install it with "
                                "`DS_BUILD_OPS=0 pip install -r requirements-deepspeed.txt -c constraints.txt`")
        else:
            self.unavailable = None

    def wrap(self, module, config: DDPConfig, group, agreement_group=None, expert_group=None) -> DeepSpeedDDP:
        refuse_unsupported(self, config)
        if expert_group is not None:
            raise ValueError("expert_group: got a group, but the deepspeed adapter does not claim the expert level")
        if dist.get_world_size(group) != dist.get_world_size():
            raise ValueError(f"group: got {dist.get_world_size(group)} of {dist.get_world_size()} ranks, but "
                             "DeepSpeed reduces over its data-parallel group, here the whole world")
        return DeepSpeedDDP(self, module, config, group, agreement_group or group)

    clip_norm_types = frozenset({2.0})
    """DeepSpeed's gradient_clipping is the L2 norm only (deepspeed 0.19.8 runtime/zero/stage_1_and_2.py:2951 and
    stage3.py:2579 call get_grad_norm_direct with its default norm_type=2, and no config sets another)."""

    def make_optimizer(self, ddp: DeepSpeedDDP, make_optimizer, max_grad_norm=None, norm_type=2.0):
        if norm_type not in self.clip_norm_types:
            raise ValueError(f"norm_type: got {norm_type}, but DeepSpeed's gradient_clipping is the L2 norm (2.0)")
        return DeepSpeedOptimizer(ddp, make_optimizer, max_grad_norm)

    def finalize_model_grads(self, models, num_tokens=None) -> None:
        """Finish every sync; with ``num_tokens``, divide the (summed) reduced grads by the global count if > 0."""
        for model in models:
            model.finish_grad_sync()
        if num_tokens is None:
            return
        dist.all_reduce(num_tokens, group=models[0].group)
        total = int(num_tokens.item())
        if total <= 0:
            return
        for model in models:
            for buf in model.buffers:
                named = list(buf.params.items())
                model.set_reduced_grads(named, [g / total for g in model.reduced_grads(named)])

    def engine_config(self, module: torch.nn.Module, config: DDPConfig, max_grad_norm: float | None) -> dict:
        """The DeepSpeed config dict for ``config`` (see the module docstring for the mapping)."""
        zero = {"stage": self.stage, "overlap_comm": config.overlap_grad_reduce, **STAGE_OPTIONS.get(self.stage, {}),
                **self.zero_options}
        if config.disable_bucketing or config.bucket_size is not None:
            bucket = sum(p.numel() for p in module.parameters()) if config.disable_bucketing else config.bucket_size
            # ZeRO-1/2 refuse an odd allgather_bucket_size (stage_1_and_2.py:387-391, its NCCL start alignment);
            # the param gather's chunking is not what the suites check, so an odd model rounds it up by one.
            zero.update(reduce_bucket_size=bucket, allgather_bucket_size=bucket + bucket % 2)
        ds = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": zero,
              "zero_allow_untested_optimizer": True, "steps_per_print": 2**31 - 1}
        if any(p.dtype == torch.bfloat16 for p in module.parameters()):
            ds["bf16"] = {"enabled": True}
            ds["communication_data_type"] = "bf16"
        if config.calculate_per_token_loss:
            ds["gradient_allreduce_op"] = "sum"
        ds["gradient_clipping"] = max_grad_norm or 0.0  # DeepSpeed's default is 1.0: clipping on
        return {**ds, **self.engine_options}

    def initialize(self, module, config: DDPConfig, make_optimizer, max_grad_norm, group):
        import deepspeed

        deepspeed.ops.__compatible_ops__[SHM_OP] = False  # module docstring: no C++ build
        device = next(module.parameters()).device
        os.environ.setdefault("LOCAL_RANK", str(device.index or 0))
        logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
        params = [p for p in module.parameters() if p.requires_grad]
        engine, *_ = deepspeed.initialize(model=module, optimizer=make_optimizer(params),
                                          config=self.engine_config(module, config, max_grad_norm),
                                          mpu=DataParallelOnly(group))
        return engine


class DataParallelOnly:
    """What DeepSpeed asks of a model-parallel unit (``mpu``): data parallelism over the group it is handed,
    no tensor or pipeline parallelism. Given it, DeepSpeed reduces over that group (the suites' recorder)
    instead of the world it would use by itself."""

    def __init__(self, group) -> None:
        self.group = group
        self.alone = _own_group()

    def get_data_parallel_group(self):
        return self.group

    def get_data_parallel_world_size(self) -> int:
        return dist.get_world_size(self.group)

    def get_data_parallel_rank(self) -> int:
        return dist.get_rank(self.group)

    def get_data_parallel_group_ranks(self) -> list[int]:
        return dist.get_process_group_ranks(self.group)

    def get_model_parallel_group(self):
        return self.alone

    def get_model_parallel_world_size(self) -> int:
        return 1

    def get_model_parallel_rank(self) -> int:
        return 0

    get_tensor_model_parallel_group = get_model_parallel_group
    get_tensor_model_parallel_world_size = get_model_parallel_world_size
    get_tensor_model_parallel_rank = get_model_parallel_rank

    def get_pipeline_model_parallel_world_size(self) -> int:
        return 1


@functools.cache
def _own_group():
    """A group of this rank alone, made by this rank alone."""
    return new_group([dist.get_rank()], use_local_synchronization=True)


def _full_grad(param: torch.nn.Parameter) -> torch.Tensor:
    from deepspeed.utils import safe_get_full_grad

    grad = safe_get_full_grad(param)
    if grad is None:
        raise RuntimeError("safe_get_full_grad: got None, but should give the reduced gradient (the param has "
                           "none in ZeRO's partitions: no grad reached it, or the optimizer stepped already)")
    return grad


def _full_param(param: torch.nn.Parameter) -> torch.Tensor:
    from deepspeed.utils import safe_get_full_fp32_param

    return safe_get_full_fp32_param(param)


def _stand_in_optimizer(params) -> torch.optim.Optimizer:
    """Fills DeepSpeed's optimizer slot when only the ddp level is used: nothing steps it."""
    return torch.optim.SGD(params, lr=0.0)


implementation = DeepSpeedImplementation(2)
zero1 = DeepSpeedImplementation(1)
# bf16 params under ZeRO-1 with fp32 grad accumulation: DeepSpeed's BF16_Optimizer, which accumulates each
# microbatch's bf16 grads into fp32 grads and all-reduces those at the engine's accumulation boundary; what it
# does is what grad_reduce_in_fp32 asks, and nothing else (docs/peers.md, DeepSpeed PR #7985)
bf16_fp32_accumulation = DeepSpeedImplementation(
    1, name="deepspeed-bf16", boundary=True,
    engine_options={"data_types": {"grad_accum_dtype": "fp32"}, "communication_data_type": "fp32"},
    lacks=(*STAGE_LACKS[1], *(lack for lack in _common_lacks(1) if lack.what != "grad_reduce_in_fp32"),
           Lack("grad_reduce_in_fp32=False", "DeepSpeed's BF16_Optimizer accumulates and all-reduces fp32 grads "
                                             "(data_types.grad_accum_dtype fp32, runtime/bf16_optimizer.py "
                                             "_update_hp_grad): it runs the configurations that ask for fp32 "
                                             "grads")))
zero3 = DeepSpeedImplementation(3, expectations="deepspeed")
round_robin = DeepSpeedImplementation(2, {"round_robin_gradients": True}, name="deepspeed-round-robin")
# ZeRO-2 with its optimizer offloaded to the CPU, stepping the suite's torch optimizer there (DeepSpeedCPUAdam would
# need a C++ op built), microbatches through the engine's own boundary as offload's users run them, for its
# findings (docs/peers.md)
offload = DeepSpeedImplementation(2, {"offload_optimizer": {"device": "cpu"}}, name="deepspeed-offload",
                                  engine_options={"zero_force_ds_cpu_optimizer": False}, boundary=True)
