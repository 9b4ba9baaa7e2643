"""Overlap efficiency: how much of the gradient communication hides behind backward.

Per implementation, three step times on the same model and data, measured in
alternating rounds: compute-only (no communication), overlapped (buckets
reduce during backward) and serialized (everything reduced after backward).
``efficiency = (T_serial - T_overlap) / (T_serial - T_compute)`` (docs/rules.md,
section 5). A step here is forward, backward and the grad sync; no optimizer.

Compute-only is, for the reference, the same DDP over a one-rank group (hooks
and buffers, no peers); for torch DDP, its ``noop_hook``. Serialized is, for
the reference, ``overlap_grad_reduce=False``; for torch DDP, backward under
``no_sync`` followed by one coalesced all-reduce of every grad. torch DDP's own
backward compute/comm/overlap timers are recorded beside it as a cross-check.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook

from reference.config import DDPConfig
from reference.ddp import DistributedDataParallel

from .launch import BenchContext
from .step_time import make_model

BUCKET_ELEMENTS = 2**20  # 4 MiB of fp32, for both implementations
TIMER_KEYS = ("avg_backward_compute_time", "avg_backward_comm_time", "avg_backward_compute_comm_overlap_time")


def _singleton_groups(ctx: BenchContext):
    """Every rank must create every one-rank group (new_group is collective); keep our own."""
    groups = [dist.new_group([r]) for r in range(ctx.world_size)]
    return groups[ctx.rank]


def _reference_steps(ctx: BenchContext, width: int, depth: int):
    alone = _singleton_groups(ctx)
    variants = {}
    for name, config, group in (
        ("compute", DDPConfig(overlap_grad_reduce=True, bucket_size=BUCKET_ELEMENTS), alone),
        ("overlap", DDPConfig(overlap_grad_reduce=True, bucket_size=BUCKET_ELEMENTS), ctx.group),
        ("serial", DDPConfig(overlap_grad_reduce=False), ctx.group),
    ):
        ddp = DistributedDataParallel(make_model(width, depth).to(ctx.device), config, group,
                                      agreement_group=alone if group is alone else None)

        def step(x, ddp=ddp):
            ddp(x).square().mean().backward()
            ddp.finish_grad_sync()
            ddp.zero_grad_buffer()

        variants[name] = step
    return variants


def _torch_steps(ctx: BenchContext, width: int, depth: int):
    bucket_mb = BUCKET_ELEMENTS * 4 / 2**20
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    ddps = {name: torch.nn.parallel.DistributedDataParallel(
        make_model(width, depth).to(ctx.device), device_ids=device_ids, bucket_cap_mb=bucket_mb)
        for name in ("compute", "overlap", "serial")}
    ddps["compute"].register_comm_hook(None, noop_hook)
    ddps["overlap"]._set_ddp_runtime_logging_sample_rate(1)

    def plain(ddp):
        def step(x):
            ddp(x).square().mean().backward()
            ddp.zero_grad(set_to_none=True)
        return step

    def serial(x, ddp=ddps["serial"]):
        with ddp.no_sync():
            ddp(x).square().mean().backward()
        with dist._coalescing_manager(group=ctx.group, async_ops=True) as manager:
            for p in ddp.parameters():
                p.grad.div_(ctx.world_size)
                dist.all_reduce(p.grad, group=ctx.group, async_op=True)
        manager.wait()
        ddp.zero_grad(set_to_none=True)

    return {"compute": plain(ddps["compute"]), "overlap": plain(ddps["overlap"]), "serial": serial}, ddps["overlap"]


def measure(ctx: BenchContext, width: int = 1024, depth: int = 6, batch: int = 32, rounds: int = 15,
            warmup: int = 2) -> list[dict]:
    """Median step times per variant and implementation; identical schedule on every rank."""
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(ctx.rank)).to(ctx.device)
    torch_variants, torch_overlap_ddp = _torch_steps(ctx, width, depth)
    impls = {"reference": _reference_steps(ctx, width, depth), "torch": torch_variants}
    times = {(impl, v): [] for impl in impls for v in ("compute", "overlap", "serial")}
    for i in range(warmup + rounds):
        for impl, variants in impls.items():
            for variant, step in variants.items():
                ctx.sync()
                start = time.perf_counter()
                step(x)
                ctx.sync()
                if i >= warmup:
                    times[(impl, variant)].append(time.perf_counter() - start)
    logging = torch_overlap_ddp._get_ddp_logging_data()
    timers = {k: logging.get(k) for k in TIMER_KEYS}
    rows = []
    for impl in impls:
        t = {v: 1e3 * statistics.median(times[(impl, v)]) for v in ("compute", "overlap", "serial")}
        exposed = t["serial"] - t["compute"]
        rows.append({
            "impl": impl, "compute_ms": t["compute"], "overlap_ms": t["overlap"], "serial_ms": t["serial"],
            "efficiency": (t["serial"] - t["overlap"]) / exposed if exposed > 0 else None,
            "rounds": rounds, "world_size": ctx.world_size, "backend": ctx.backend,
            "ddp_timers": _timer_summary(timers) if impl == "torch" else None,
        })
    return rows


def _timer_summary(timers: dict) -> dict | None:
    """torch DDP's own view (ns -> ms) and its overlap share: overlap time / comm time."""
    if not all(isinstance(timers.get(k), (int, float)) and timers[k] > 0 for k in TIMER_KEYS[:2]):
        return None
    comm = timers["avg_backward_comm_time"]
    return {
        "backward_compute_ms": timers["avg_backward_compute_time"] / 1e6,
        "backward_comm_ms": comm / 1e6,
        "compute_comm_overlap_ms": timers["avg_backward_compute_comm_overlap_time"] / 1e6,
        "overlap_share_of_comm": timers["avg_backward_compute_comm_overlap_time"] / comm,
    }
