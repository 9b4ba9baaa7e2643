"""Step time of the reference DDP against torch's DistributedDataParallel, alternating in one run.

``python -m benchmarks.step_time`` spawns ``--world-size`` gloo ranks. Each
measured round times one training step of each implementation on the same
model, data and bucket size (forward, backward, grad sync, SGD step, zeroing),
so machine noise hits both alike; the figure reported is the median of the
per-round ratios, with its interquartile range. Goal: <= 1.05 at world size 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from .launch import BenchContext, run_on_ranks

BUCKET_MIB = 4


def make_model(width: int, depth: int) -> torch.nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def _steppers(ctx: BenchContext, width: int, depth: int, overlap: bool):
    from reference.config import DDPConfig
    from reference.ddp import DistributedDataParallel
    from reference.optimizer import ReferenceOptimizer

    ours_model, torch_model = make_model(width, depth).to(ctx.device), make_model(width, depth).to(ctx.device)
    config = DDPConfig(overlap_grad_reduce=overlap, bucket_size=BUCKET_MIB * 2**20 // 4)
    ours = DistributedDataParallel(ours_model, config, ctx.group)
    ours_opt = ReferenceOptimizer(ours, lambda ps: torch.optim.SGD(ps, lr=1e-3))
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    theirs = torch.nn.parallel.DistributedDataParallel(torch_model, device_ids=device_ids, bucket_cap_mb=BUCKET_MIB)
    theirs_opt = torch.optim.SGD(torch_model.parameters(), lr=1e-3)

    def ours_step(x):
        ours(x).square().mean().backward()
        ours.finish_grad_sync()
        ours_opt.step()
        ours_opt.zero_grad()

    def theirs_step(x):
        theirs(x).square().mean().backward()
        theirs_opt.step()
        theirs_opt.zero_grad(set_to_none=True)

    return ours_step, theirs_step


def time_steps(ctx: BenchContext, args: dict) -> dict[str, list[float]]:
    """Per-step seconds of each implementation on this rank, alternating which goes first."""
    ours_step, theirs_step = _steppers(ctx, args["width"], args["depth"], args["overlap"])
    x = torch.randn(args["batch"], args["width"], generator=torch.Generator().manual_seed(ctx.rank)).to(ctx.device)
    times = {"reference": [], "torch": []}
    for i in range(args["warmup"] + args["rounds"]):
        order = (("reference", ours_step), ("torch", theirs_step))
        for name, step in order if i % 2 else reversed(order):
            ctx.sync()
            start = time.perf_counter()
            step(x)
            ctx.sync()
            if i >= args["warmup"]:
                times[name].append(time.perf_counter() - start)
    return times


def measure(world_size: int = 2, width: int = 1024, depth: int = 6, batch: int = 32, rounds: int = 20,
            warmup: int = 3, overlap: bool = True) -> dict:
    """Time both implementations side by side; returns per-step medians and the ratio's spread."""
    args = dict(width=width, depth=depth, batch=batch, rounds=rounds, warmup=warmup, overlap=overlap)
    return summarize(run_on_ranks(time_steps, world_size, args)[0], args, world_size)  # rank 0's clock


def summarize(times: dict[str, list[float]], args: dict, world_size: int) -> dict:
    """Medians and the per-round ratio's median and quartiles."""
    ratios = sorted(a / b for a, b in zip(times["reference"], times["torch"]))
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    params = args["width"] * args["width"] * args["depth"] + args["width"] * args["depth"]
    return {
        "world_size": world_size, "params": params, "bucket_mib": BUCKET_MIB,
        "overlap": args["overlap"], "rounds": args["rounds"],
        "reference_median_ms": 1e3 * statistics.median(times["reference"]),
        "torch_ddp_median_ms": 1e3 * statistics.median(times["torch"]),
        "ratio_median": statistics.median(ratios), "ratio_q1": q1, "ratio_q3": q3,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.step_time", description=__doc__)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--depth", type=int, default=6)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.world_size, args.width, args.depth, rounds=args.rounds), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
