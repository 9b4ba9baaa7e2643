"""The reference bucketed DDP wrapper: hooks fill ``main_grad``, bucket groups reduce it.

Each trainable param's post-accumulate-grad hook adds ``param.grad`` into its
``main_grad`` view, frees ``param.grad`` and marks the param ready. With
``overlap_grad_reduce`` a bucket group launches as soon as its last param is
ready; otherwise everything launches in ``finish_grad_sync``.

First-iteration semantics differ from upstream in a documented, equivalent
way: a post-accumulate hook fires exactly once per param per backward (autograd
sums repeated uses first), so the "golden" ready count is always 1 and groups
launch from the hook from the first step on. Groups that never completed are
launched, in order, from ``finish_grad_sync``, after all ranks have agreed
that no param is missing a grad.

Expert-parallel params (``param.allreduce = False``) live in buffers of their
own, planned, reduced and sharded over the expert-data-parallel group instead
of the data-parallel group, with upstream's scaling (docs/rules.md, section 2).
With several distributed-optimizer instances each buffer is planned and
sharded for one instance and reduced within it, then across instances
(``reference.reduction_groups``).

Under ``fp8_param_gather`` the params a model marks quantized
(``param.fp8_recipe``) are held so (``reference.buffer``), their buckets
grouped as upstream's ``partition_buckets`` does (each FP8 bucket a group,
the last also taking every other bucket of its kind); after a gather each
bucket is consumed (re-quantized, and, where the gather went through the
grad memory, zeroed), in ``start_param_sync`` or, overlapped, in the next
forward.
"""

from __future__ import annotations

import contextlib
import datetime
from typing import Iterator

import torch
import torch.distributed as dist

from .agreement import DEFAULT_TIMEOUT, control_group, differences_from_rank0, gather_problems
from .bucket_group import BucketGroup, GradSyncError, LocalFp32Grad, Member
from .buffer import ParamAndGradBuffer, build_buffers
from .collectives import all_gather
from .config import DDPConfig
from .reduction_groups import ReduceGroups, reduce_groups
from .layout import is_expert_parallel


class DistributedDataParallel(torch.nn.Module):
    # The classes it builds from; a variant (or a deliberately broken one) swaps one.
    buffer_cls = ParamAndGradBuffer
    bucket_group_cls = BucketGroup

    def __init__(
        self,
        module: torch.nn.Module,
        config: DDPConfig = DDPConfig(),
        process_group: dist.ProcessGroup | None = None,
        device: torch.device | str | None = None,
        agreement_group: dist.ProcessGroup | None = None,
        timeout: datetime.timedelta = DEFAULT_TIMEOUT,
        expert_data_parallel_group: dist.ProcessGroup | None = None,
    ) -> None:
        super().__init__()
        self.module = module
        self.config = config
        self.group = process_group or dist.group.WORLD
        self.dp = dist.get_world_size(self.group)
        self.rank = dist.get_rank(self.group)
        self.expert_group = expert_data_parallel_group or self.group
        self.expert_dp = dist.get_world_size(self.expert_group)
        self.control = agreement_group or control_group(self.group, timeout)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._check_same_everywhere(named)
        if not named:
            raise ValueError("module: got no trainable parameters, but should have at least one")
        self._check_expert_group()
        device = torch.device(device) if device is not None else named[0][1].device
        self.buffers: list[ParamAndGradBuffer] = build_buffers(
            named, config.layout_config(self.dp, self.expert_dp), device, self.buffer_cls
        )
        instances = config.num_distributed_optimizer_instances
        self.dense_groups = reduce_groups(self.group, instances)
        self.expert_groups = reduce_groups(self.expert_group, instances)
        self.local_fp32_grads = self._fp32_main_grads(named)
        self.bucket_groups = self._partition()
        self._bucket_group_of = {name: g for g in self.bucket_groups for name in g.param_names}
        self._lifecycle_of = {name: (buf.lifecycle, b) for buf in self.buffers if buf.lifecycle is not None
                              for name, (_, _, b) in buf.layout.param_index_map.items()}
        self._is_last_microbatch = True
        self._finished = False  # grads reduced since the last backward; the optimizer checks it
        self._param_gathers: list = []
        for name, param in named:
            param.register_post_accumulate_grad_hook(self._hook(name))

    # -- construction -------------------------------------------------------------------

    def _check_same_everywhere(self, named) -> None:
        fingerprint = {
            **{f"config.{k}": v for k, v in self.config.as_dict().items()},
            "expert data-parallel size": self.expert_dp,
            "parameters": [(n, tuple(p.shape), str(p.dtype), is_expert_parallel(p)) for n, p in named],
        }
        diffs = differences_from_rank0(fingerprint, self.control)
        if diffs:
            raise ValueError(
                "DDP configuration differs across ranks, but should be identical on every rank:\n  "
                + "\n  ".join(diffs)
            )

    def _check_expert_group(self) -> None:
        dense = set(dist.get_process_group_ranks(self.group))
        expert = dist.get_process_group_ranks(self.expert_group)
        if not set(expert) <= dense or self.dp % self.expert_dp:
            raise ValueError(
                f"expert_data_parallel_group: got ranks {expert}, but should be a subgroup of the "
                f"data-parallel group (ranks {sorted(dense)}) whose size divides {self.dp}"
            )

    def _fp32_main_grads(self, named) -> dict[str, LocalFp32Grad]:
        """Params named by ``param_name_patterns_for_fp32_local_accumulation`` get an fp32 ``main_grad`` of
        their own; their view into the buffer is where the reduction happens."""
        out = {}
        for name, param in named:
            if self.config.accumulates_in_fp32(name):
                in_buffer = param.main_grad
                param.main_grad = torch.zeros(in_buffer.shape, dtype=torch.float32, device=in_buffer.device)
                out[name] = LocalFp32Grad(param.main_grad, in_buffer)
        return out

    def groups_of(self, buffer: ParamAndGradBuffer) -> ReduceGroups:
        """The groups a buffer is reduced over: expert-data-parallel ones for expert buffers."""
        return self.expert_groups if buffer.layout.expert_parallel else self.dense_groups

    def group_of(self, buffer: ParamAndGradBuffer) -> dist.ProcessGroup:
        """The group a buffer is sharded over: its data-parallel group, or this rank's instance of it."""
        return self.groups_of(buffer).shard

    def rank_in(self, buffer: ParamAndGradBuffer) -> int:
        """This rank's index in ``group_of(buffer)``: which shard of each of its buckets it owns."""
        return dist.get_rank(self.group_of(buffer))

    def counts_here(self, buffer: ParamAndGradBuffer) -> bool:
        """Whether this rank's shards of ``buffer`` are counted in norms and zero counts: those of the first
        distributed-optimizer instance (every instance holds the same reduced grads)."""
        across = self.groups_of(buffer).across
        return across is None or across.rank() == 0

    def _partition(self) -> list[BucketGroup]:
        """Bucket groups: ``buckets_per_group`` consecutive buckets of a buffer; or, where a kind (dense, expert) has
        a buffer of quantized params, upstream's rule: each of its buckets a group, the last one also holding
        every bucket of the kind's other buffers (their params are few, and wait for the first layers' grads)."""
        members: list[list[Member]] = []
        for expert in (False, True):
            kind = [buf for buf in self.buffers if buf.layout.expert_parallel == expert]
            quantized = [buf for buf in kind if buf.layout.recipe is not None]
            if quantized:
                (fp8,) = quantized
                groups = [[Member(fp8, b)] for b in fp8.buckets]
                groups[-1] += [Member(buf, b) for buf in kind if buf is not fp8 for b in buf.buckets]
                members += groups
                continue
            per = self.config.buckets_per_group
            members += [[Member(buf, b) for b in buf.buckets[start: start + per]]
                        for buf in kind for start in range(0, len(buf.buckets), per)]
        return [self._group(i, group) for i, group in enumerate(members)]

    def _group(self, index: int, members: list[Member]) -> BucketGroup:
        buf = members[0].buffer
        expert_dp = self.expert_dp if buf.layout.expert_parallel else None
        return self.bucket_group_cls(
            index=index,
            members=members,
            groups=self.groups_of(buf),
            scaling_factor=self.config.gradient_scaling_factor(self.dp, expert_dp),
            average_in_collective=self.config.average_in_collective,
            reduce_scatter=self.config.distributed_optimizer,
            check_for_nan=self.config.check_for_nan_in_grad,
            fp32_accumulation=self.config.reduce_scatter_with_fp32_accumulation,
            local_fp32_grads=self.local_fp32_grads,
        )

    # -- backward -----------------------------------------------------------------------

    def _hook(self, name: str):
        shared = self._lifecycle_of.get(name)

        def hook(param: torch.Tensor) -> None:
            if param.grad is None:
                return
            if shared is not None:  # its grad memory may hold params: every bucket of it must be consumed
                shared[0].grad(shared[1])
            param.main_grad.add_(param.grad)
            param.grad = None
            if self._is_last_microbatch:
                self._finished = False
                self._bucket_group_of[name].register_grad_ready(name, launch=self.launches_from_hooks())

        return hook

    def launches_from_hooks(self) -> bool:
        """Whether a group launches as soon as it completes (overlap) or waits for finish."""
        return self.config.overlap_grad_reduce

    def forward(self, *args, **kwargs):
        self.finish_param_sync()
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Accumulate grads into ``main_grad`` without reducing (all microbatches but the last)."""
        self._is_last_microbatch = False
        try:
            yield
        finally:
            self._is_last_microbatch = True

    def finish_grad_sync(self, force_all_reduce: bool = False) -> None:
        """Launch what is left, wait for every group; problems on any rank raise on all ranks.

        ``force_all_reduce``: groups not launched yet all-reduce their buckets over every replica, so every
        rank holds every reduced grad, even under the distributed optimizer (with overlap, the groups that
        launched during backward keep their reduce-scatter, as upstream's).
        """
        local = [
            f"param {name!r} (bucket group {g.index}) got no gradient on rank {self.rank}"
            for g in self.bucket_groups
            for name in g.missing()
        ]
        if self.config.check_across_ranks:
            everyone = gather_problems(local, self.control)
        else:
            everyone = local
        if everyone:
            raise GradSyncError("gradient synchronization failed:\n  " + "\n  ".join(everyone))
        for g in self.bucket_groups:
            g.start(force_all_reduce)
        for g in self.bucket_groups:
            g.wait()
        nan = [p for g in self.bucket_groups for p in g.problems]
        if self.config.check_across_ranks and self.config.check_for_nan_in_grad:
            nan = gather_problems(nan, self.control)
        if nan:
            raise GradSyncError("non-finite gradients before reduction:\n  " + "\n  ".join(nan))
        self._finished = True

    @property
    def grad_sync_finished(self) -> bool:
        return self._finished

    def zero_grad_buffer(self, buffers: list[ParamAndGradBuffer] | None = None) -> None:
        """Zero the grad buffers (and fp32 main grads of their own) and reset readiness for the next step.
        ``buffers``: an optimizer's own (all by default): two optimizers each zero theirs, never the other's,
        whose params may be gathering through its grad memory."""
        mine = self.buffers if buffers is None else buffers
        names = {name for buf in mine for name in buf.params}
        for buf in mine:
            buf.zero_grad()
        for name, grad in self.local_fp32_grads.items():
            if name in names:
                grad.main_grad.zero_()
        for g in self.bucket_groups:
            if g.param_names & names:  # readiness only: a group across two optimizers' buffers resets at either
                g.reset()
        self._finished = False

    def scale_gradients(self, factor: float) -> None:
        for buf in self.buffers:
            buf.grad_data.mul_(factor)
        for grad in self.local_fp32_grads.values():
            grad.main_grad.mul_(factor)

    # -- params (distributed optimizer) ---------------------------------------------------

    def start_param_sync(self, buffers: list[ParamAndGradBuffer] | None = None, force_sync: bool = False) -> None:
        """All-gather every bucket's params from each rank's shard (async if overlapping, unless ``force_sync``); a
        one-rank group's shard is its whole bucket already. A bucket gathered synchronously is consumed at once;
        one gathered asynchronously, in ``finish_param_sync``. ``buffers``: an optimizer's own (all by
        default)."""
        async_op = self.config.overlap_param_gather and not force_sync
        for buf in self.buffers if buffers is None else buffers:
            group, rank = self.group_of(buf), self.rank_in(buf)
            for bucket in self.gathered_buckets(buf):
                if buf.lifecycle is not None:
                    buf.lifecycle.gather(bucket.index, async_op and group.size() > 1)
                if group.size() == 1:
                    buf.consume(bucket.index)
                    continue
                own = buf.param_shards(bucket.index)[rank]
                work = all_gather(bucket.param_data, own, group=group, async_op=async_op)
                if async_op:
                    self._param_gathers.append((buf, bucket.index, work))
                else:
                    buf.consume(bucket.index)

    def quantized_storage(self) -> dict[str, object]:
        """Every quantized param's storage (``param.fp8``), by name."""
        return {name: buf.params[name].fp8 for buf in self.buffers if buf.layout.recipe is not None
                for name in buf.params}

    def gathered_buckets(self, buf: ParamAndGradBuffer) -> list:
        """The buckets of ``buf`` whose params a step's gather brings to every rank: every one."""
        return buf.buckets

    def finish_param_sync(self) -> None:
        """Wait for every gather in flight, then consume each bucket, in order."""
        for buf, bucket, work in self._param_gathers:
            work.wait()
            if buf.lifecycle is not None:
                buf.lifecycle.waited(bucket)
        for buf, bucket, _ in self._param_gathers:
            buf.consume(bucket)
        self._param_gathers.clear()
