"""``python -m reference.layout``: plan a real model's buffers without allocating memory."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

import torch

from .catalog import model_names, model_specs
from .planner import LayoutConfig, ModelLayout, ParamSpec, default_bucket_size, plan_layout
from .policies import HIGH_BUSBW_ALIGNMENT, POLICIES

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m reference.layout", description=__doc__)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", choices=model_names(), help="a model from fixtures/models.json")
    what.add_argument("--numel", type=int, help="one flat parameter of this many elements")
    parser.add_argument("--dp", type=int, default=8, help="data-parallel size (default 8)")
    parser.add_argument(
        "--ep", type=int, default=1,
        help="expert-parallel size for a mixture-of-experts model (default 1): this rank holds "
        "experts / ep experts, whose buffers are planned for the expert-data-parallel size dp / ep",
    )
    parser.add_argument(
        "--bucket-size", type=int, default=None,
        help="elements per bucket (default: upstream's max(40M, 1M * dp)); 0 for one bucket",
    )
    parser.add_argument("--policy", choices=list(POLICIES), default="padded")
    parser.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    parser.add_argument("--grad-reduce-in-fp32", action="store_true")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--summary", action="store_true", help="totals only, no per-bucket rows")
    args = parser.parse_args(argv)
    if args.numel is not None and args.numel < 1:
        parser.error(f"--numel: got {args.numel}, but should be >= 1")
    if args.ep < 1 or args.dp % args.ep:
        parser.error(f"--ep: got {args.ep}, but should be a divisor of --dp {args.dp}")
    return args


def bucket_rows(layout: ModelLayout) -> list[dict]:
    rows = []
    for b, buf in enumerate(layout.buffers):
        for i, (lo, hi) in enumerate(buf.bucket_indices):
            shard = (hi - lo) // buf.dp if (hi - lo) % buf.dp == 0 else None
            rows.append({
                "buffer": b,
                "kind": "expert" if buf.expert_parallel else "dense",
                "bucket": i,
                "params": len(buf.bucket_param_names(i)),
                "numel": hi - lo,
                "unpadded": buf.per_bucket_numel_unpadded[i],
                "end_padding": hi - lo - buf.per_bucket_numel_unpadded[i],
                "shard": shard,
                "shard_mod_2**16": None if shard is None else shard % HIGH_BUSBW_ALIGNMENT,
            })
    return rows


def totals(layout: ModelLayout) -> dict:
    raw = sum(s.numel for buf in layout.buffers for s in buf.params)
    numel = sum(buf.numel for buf in layout.buffers)
    unpadded = sum(buf.numel_unpadded for buf in layout.buffers)
    return {
        "buffers": len(layout.buffers),
        "expert_buffers": len(layout.expert),
        "buckets": sum(buf.num_buckets for buf in layout.buffers),
        "param_elements": raw,
        "numel_unpadded": unpadded,
        "numel": numel,
        "padding": numel - raw,
        "padding_pct": 100.0 * (numel - raw) / raw,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    dtype = DTYPES[args.dtype]
    bucket_size = default_bucket_size(args.dp) if args.bucket_size is None else args.bucket_size or None
    try:
        specs = (model_specs(args.model, dtype, ep=args.ep) if args.model
                 else [ParamSpec("flat", (args.numel,), dtype)])
        config = LayoutConfig(args.dp, args.policy, bucket_size, args.grad_reduce_in_fp32,
                              expert_dp=args.dp // args.ep)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    layout = plan_layout(specs, config)
    rows, summary = bucket_rows(layout), totals(layout)
    header = {"model": args.model or f"flat {args.numel}", "dp": args.dp, "ep": args.ep, "policy": args.policy,
              "bucket_size": bucket_size, "dtype": args.dtype}
    if args.json:
        out = {"config": header, "totals": summary}
        if not args.summary:
            out["buckets"] = rows
        print(json.dumps(out, indent=2))
        return 0
    from tabulate import tabulate

    print(" ".join(f"{k}={v}" for k, v in header.items()))
    if not args.summary:
        print(tabulate(rows, headers="keys", tablefmt="github", intfmt=","))
        print()
    print(tabulate([summary], headers="keys", tablefmt="github", intfmt=",", floatfmt=".4f"))
    return 0
