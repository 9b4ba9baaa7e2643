"""Step time of the reference DDP against torch's DistributedDataParallel, alternating in one run.

``python -m benchmarks.step_time`` spawns ``--world-size`` gloo ranks. Each
measured round times one training step of each implementation on the same
model, data and bucket size (forward, backward, grad sync, SGD step, zeroing),
so machine noise hits both alike; the figure reported is the median of the
per-round ratios, with its interquartile range. Goal: <= 1.05 at world size 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

BUCKET_MIB = 4


def make_model(width: int, depth: int) -> torch.nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def _steppers(width: int, depth: int, overlap: bool):
    from reference.config import DDPConfig
    from reference.ddp import DistributedDataParallel
    from reference.optimizer import ReferenceOptimizer

    ours_model, torch_model = make_model(width, depth), make_model(width, depth)
    config = DDPConfig(overlap_grad_reduce=overlap, bucket_size=BUCKET_MIB * 2**20 // 4)
    ours = DistributedDataParallel(ours_model, config)
    ours_opt = ReferenceOptimizer(ours, lambda ps: torch.optim.SGD(ps, lr=1e-3))
    theirs = torch.nn.parallel.DistributedDataParallel(torch_model, bucket_cap_mb=BUCKET_MIB)
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


def _rank(rank: int, world_size: int, store: str, args: dict, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=120))
    ours_step, theirs_step = _steppers(args["width"], args["depth"], args["overlap"])
    x = torch.randn(args["batch"], args["width"], generator=torch.Generator().manual_seed(rank))
    times = {"reference": [], "torch": []}
    for i in range(args["warmup"] + args["rounds"]):
        for name, step in (("reference", ours_step), ("torch", theirs_step)) if i % 2 else (
            ("torch", theirs_step), ("reference", ours_step)
        ):
            start = time.perf_counter()
            step(x)
            if i >= args["warmup"]:
                times[name].append(time.perf_counter() - start)
    if rank == 0:
        with open(out, "w") as fh:
            json.dump(times, fh)
    dist.destroy_process_group()


def measure(world_size: int = 2, width: int = 1024, depth: int = 6, batch: int = 32, rounds: int = 20,
            warmup: int = 3, overlap: bool = True) -> dict:
    """Time both implementations side by side; returns per-step medians and the ratio's spread."""
    args = dict(width=width, depth=depth, batch=batch, rounds=rounds, warmup=warmup, overlap=overlap)
    with tempfile.TemporaryDirectory() as tmp:
        store, out = os.path.join(tmp, "store"), os.path.join(tmp, "times.json")
        mp.start_processes(_rank, args=(world_size, store, args, out), nprocs=world_size, start_method="spawn")
        with open(out) as fh:
            times = json.load(fh)
    ratios = sorted(a / b for a, b in zip(times["reference"], times["torch"]))
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    params = width * width * depth + width * depth
    return {
        "world_size": world_size, "backend": "gloo", "params": params, "bucket_mib": BUCKET_MIB,
        "overlap": overlap, "rounds": rounds,
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
