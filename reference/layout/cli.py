"""``python -m reference.layout``: plan a model's buffers without allocating memory.

The model is one of the catalogue's, one flat tensor, a Hugging Face
``config.json`` or any ``torch.nn.Module`` a factory of yours returns; the last
two are built on the meta device (shapes only) and read by ``from_module``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import torch

from cli import Arg, Count, Parser

from .catalog import model_names, model_specs
from .from_module import read_module
from ..quantize import MX, RECIPES, quantizable
from .planner import LayoutConfig, ModelLayout, ParamSpec, default_bucket_size, plan_layout
from .policies import HIGH_BUSBW_ALIGNMENT, POLICIES, distributed_policy_names

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class ConfigPath(Arg):
    """A Hugging Face ``config.json``, or a folder holding one."""

    kind = "file"

    def __call__(self, text: str) -> str:
        path = Path(text)
        if not (path.is_file() or (path / "config.json").is_file()):
            self.refuse(text, "a config.json, or a folder holding one, that exists")
        return text


class Factory(Arg):
    """``PKG.MOD:FACTORY``: where a factory of the user's lives (imported when the model is read)."""

    kind = "factory"

    def __call__(self, text: str) -> str:
        module, sep, name = text.partition(":")
        if not sep or not module or not name.isidentifier():
            self.refuse(text, "PKG.MOD:FACTORY, a module path and the name of a callable in it")
        return text


def add_model_source(parser: argparse.ArgumentParser) -> None:
    """The model to plan (exactly one of --model, --numel, --config, --module), its --set overrides, and
    --ep: the options every command that reads a model shares."""
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", choices=model_names(), help="a model from fixtures/models.json")
    what.add_argument("--numel", type=Count(1, unit="of elements"), help="one flat parameter of this many elements")
    what.add_argument("--config", metavar="PATH", type=ConfigPath(),
                      help="a Hugging Face config.json, or a directory holding one (needs transformers)")
    what.add_argument("--module", metavar="PKG.MOD:FACTORY", type=Factory(),
                      help="a callable of yours, importable from the current directory, that takes no "
                      "arguments and returns a torch.nn.Module (built on the meta device)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="with --config: override a config field (value parsed as JSON when it parses, "
                        "else a string); repeatable, a dotted key reaches into a nested field")
    parser.add_argument(
        "--ep", type=Count(1), default=1,
        help="expert-parallel size for a mixture-of-experts model (default 1): this rank holds "
        "experts / ep experts, whose buffers are planned for the expert-data-parallel size dp / ep",
    )


def add_planning(parser: argparse.ArgumentParser) -> None:
    """How the buffers are planned: the options the layout command and the tuner share."""
    parser.add_argument("--policy", choices=list(POLICIES), default="padded",
                        help="padding policy (default padded: the distributed optimizer, reduce-scatter)")
    parser.add_argument("--dtype", choices=list(DTYPES), default="bf16",
                        help="the dtype every param is planned in (default bf16)")
    parser.add_argument("--grad-reduce-in-fp32", action="store_true")


def check_model_source(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse what ``add_model_source``'s options cannot mean together (``args.dp``: the data-parallel
    size)."""
    if args.dp % args.ep:
        parser.error(f"--ep: got {args.ep}, but should be a divisor of --dp {args.dp}")
    if args.set and args.config is None:
        parser.error(f"--set: got {args.set[0]!r}, but --set overrides fields of a --config only")


def parser() -> Parser:
    p = Parser(prog="python -m reference.layout", description=__doc__)
    add_model_source(p)
    p.add_argument("--dp", type=Count(1), default=8, help="data-parallel size (default 8)")
    p.add_argument(
        "--bucket-size", type=Count(0, unit="of elements"), default=None,
        help="elements per bucket (default: upstream's max(40M, 1M * dp)); 0 for one bucket",
    )
    add_planning(p)
    p.add_argument("--fp8-param-gather", choices=RECIPES, default=None,
                   help="hold the 2-D weights of linear layers quantized (fp8: per-tensor, mxfp8: 32-element "
                        "blocks) in a buffer of their own, and give the buffers' bytes with and without MXFP8's "
                        "reuse of the grad buffer for the param all-gather")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--summary", action="store_true", help="totals only, no per-bucket rows")
    return p


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser_ = parser()
    args = parser_.parse_args(argv)
    check_model_source(parser_, args)
    if args.fp8_param_gather and not POLICIES[args.policy].distributed_optimizer:
        parser_.error(f"--fp8-param-gather: got {args.fp8_param_gather} with --policy {args.policy}, but should be "
                      f"given only with a distributed-optimizer policy ({distributed_policy_names()}): only it "
                      "gathers params, as DDPConfig refuses fp8_param_gather without one")
    return args


def read_specs(args: argparse.Namespace, dtype: torch.dtype) -> tuple[str, list[ParamSpec], dict | None]:
    """A label for the model, one rank's params, and what reading a built model found (None otherwise)."""
    if args.model:
        return args.model, model_specs(args.model, dtype, ep=args.ep), None
    if args.numel is not None:
        return f"flat {args.numel}", [ParamSpec("flat", (args.numel,), dtype)], None
    if args.config is not None:
        from .hf_config import build_meta_model

        label, module = build_meta_model(args.config, args.set)
    else:
        from .from_factory import build_from_factory

        label, module = build_from_factory(args.module)
    reading = read_module(module, dtype, ep=args.ep)
    if not reading.specs:
        raise ValueError(f"model: {label} has no trainable parameter ({reading.frozen} frozen), "
                         "but should have at least one")
    found = {"tensors": len(reading.specs), "frozen": reading.frozen,
             "tied": {name: list(others) for name, others in reading.ties.items()},
             "experts": list(reading.experts)}
    return label, list(reading.specs), found


def policy_rows(specs: Sequence[ParamSpec], config: LayoutConfig) -> list[dict]:
    """Every padding policy's cost at the same dp and bucket size, side by side."""
    rows = []
    for name in POLICIES:
        summary = totals(plan_layout(specs, replace(config, policy=name)))
        rows.append({"policy": name, "chosen": "*" if name == config.policy else "",
                     **{k: summary[k] for k in ("buckets", "numel", "padding", "padding_pct")}})
    return rows


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
        config = LayoutConfig(args.dp, args.policy, bucket_size, args.grad_reduce_in_fp32,
                              expert_dp=args.dp // args.ep)
        label, specs, found = read_specs(args, dtype)
    except ValueError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)  # one line, whatever the message
        return 2
    if args.fp8_param_gather:
        specs = [replace(s, quantized=args.fp8_param_gather) if quantizable(s.name, s.shape) else s for s in specs]
        config = replace(config, fp8_param_gather=True)
    layout = plan_layout(specs, config)
    rows, summary, policies = bucket_rows(layout), totals(layout), policy_rows(specs, config)
    memory = memory_rows(specs, config)
    header = {"model": label, "dp": args.dp, "ep": args.ep, "policy": args.policy,
              "bucket_size": bucket_size, "dtype": args.dtype, "fp8_param_gather": args.fp8_param_gather}
    if args.json:
        compared = {row["policy"]: {k: v for k, v in row.items() if k not in ("policy", "chosen")}
                    for row in policies}
        out = {"config": header, **({"read": found} if found else {}), "totals": summary,
               "policies": compared, "memory": memory}
        if not args.summary:
            out["buckets"] = rows
        print(json.dumps(out, indent=2))
        return 0
    from tabulate import tabulate

    print(" ".join(f"{k}={v}" for k, v in header.items()))
    if found:
        print(describe(found, args.ep))
    if not args.summary:
        print(tabulate(rows, headers="keys", tablefmt="github", intfmt=","))
        print()
    print(tabulate([summary], headers="keys", tablefmt="github", intfmt=",", floatfmt=".4f"))
    print()
    print(tabulate(memory, headers="keys", tablefmt="github", intfmt=","))
    print()
    print(tabulate(policies, headers="keys", tablefmt="github", intfmt=",", floatfmt=".4f"))
    return 0


def memory_rows(specs: Sequence[ParamSpec], config: LayoutConfig) -> list[dict]:
    """The bytes of the buffers (param buffers a distributed optimizer gathers into, grad buffers): as planned, and,
    where the model holds MXFP8 params, with the grad buffer reused for their gather and without."""
    variants = [("as planned", config)]
    if config.fp8_param_gather and any(s.quantized == MX for s in specs) and config.padding.distributed_optimizer:
        variants = [("without the reuse", config),
                    ("with the reuse", replace(config, reuse_grad_buf_for_mxfp8_param_ag=True))]
    rows = []
    for name, variant in variants:
        buffers = [b.memory() for b in plan_layout(specs, variant).buffers]
        params, grads = sum(b.params for b in buffers), sum(b.grads for b in buffers)
        rows.append({"buffers": name, "param_bytes": params, "grad_bytes": grads, "total_bytes": params + grads})
    if len(rows) == 2:
        saved = rows[0]["total_bytes"] - rows[1]["total_bytes"]
        rows.append({"buffers": "saved by the reuse", "param_bytes": rows[0]["param_bytes"] - rows[1]["param_bytes"],
                     "grad_bytes": 0, "total_bytes": saved,
                     "share": f"{100 * saved / rows[0]['total_bytes']:.1f}%"})
    return rows


def describe(found: dict, ep: int) -> str:
    """One line on what was read: tensors, ties, frozen params, experts."""
    ties = "; ".join(f"{name} = {', '.join(others)}" for name, others in found["tied"].items())
    experts = ", ".join(f"{n} ({n // ep} on this rank)" for n in sorted(set(found["experts"])))
    return (f"read: {found['tensors']} trainable tensors, {found['frozen']} frozen left out, "
            f"tied (counted once): {ties or 'none'}, experts per layer: {experts or 'none'}")
