"""Every benchmark of a run: the multi-rank ones in one launch (one set of ranks), then the single-process ones.

Ranks are spawned here (``--world-size`` of them, gloo on CPU, NCCL when
every rank has a GPU) or are torchrun's, over one node or several. Every
rank returns the same records; each node's first rank also describes its
node (host, CPU, devices, NCCL version and NCCL_* settings), so a run
records every node it ran on.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable, Sequence

from ranks import run_on_ranks

from . import BENCHMARKS
from .settings import BenchSettings

Progress = Callable[[str], None]


def selected(names: Sequence[str] | None):
    known = [b.name for b in BENCHMARKS]
    unknown = sorted(set(names or ()) - set(known))
    if unknown:
        raise ValueError(f"benchmark: got {unknown}, but should be among {', '.join(known)}")
    return [b for b in BENCHMARKS if names is None or b.name in names]


def node_record(ctx) -> dict | None:
    """This node's description, from its first rank (plain mode: one node, rank 0)."""
    if int(os.environ.get("LOCAL_RANK", ctx.rank)) != 0:
        return None
    from reports.hardware import collect_host, collect_torch

    torch_info = collect_torch()
    return {
        "node_rank": int(os.environ.get("GROUP_RANK", 0)),
        "first_rank": ctx.rank,
        "local_ranks": int(os.environ.get("LOCAL_WORLD_SIZE", ctx.world_size)),
        "host": collect_host(),
        "devices": [d["name"] for d in torch_info["devices"]],
        "nccl_version": torch_info["nccl_version"],
        "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
        "backend": ctx.backend,
    }


def _on_every_rank(ctx, settings: BenchSettings, names: list[str]) -> dict:
    out = {"node": node_record(ctx)}
    for benchmark in (b for b in BENCHMARKS if b.name in names):
        start = time.monotonic()
        out[benchmark.name] = benchmark.run(ctx, settings)
        if ctx.rank == 0:
            print(f"[benchmarks] {benchmark.name}: {time.monotonic() - start:.1f}s", file=sys.stderr, flush=True)
    return out


def run_benchmarks(settings: BenchSettings, world_size: int, names: Sequence[str] | None = None,
                   progress: Progress = print) -> dict:
    """``{benchmark name: records}`` plus ``nodes``: every node's description, by node rank."""
    chosen = selected(names)
    on_ranks = [b.name for b in chosen if b.on_ranks]
    results: dict = {"nodes": []}
    if on_ranks:
        progress(f"benchmarks on {world_size} ranks: {', '.join(on_ranks)}")
        per_rank = run_on_ranks(_on_every_rank, world_size, settings, on_ranks)
        results["nodes"] = sorted((r.pop("node") for r in per_rank if r.get("node")), key=lambda n: n["node_rank"])
        for benchmark in (b for b in chosen if b.on_ranks):
            records = per_rank[0][benchmark.name]
            benchmark.record.check(benchmark.name, records)
            results[benchmark.name] = records
    for benchmark in (b for b in chosen if not b.on_ranks):
        progress(f"benchmark {benchmark.name} (one process)")
        records = benchmark.run(settings)
        benchmark.record.check(benchmark.name, records)
        results[benchmark.name] = records
    return results
