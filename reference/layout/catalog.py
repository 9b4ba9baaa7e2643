"""Real model shapes from ``fixtures/models.json``, expanded into ``ParamSpec`` lists.

Parameter granularity matters for padding (each param start is aligned), so
the expansion follows megatron-core's module layout: fused QKV, fused
gate/up projection for gated MLPs, one norm per sub-layer (one per layer
with parallel attention/MLP), tied embeddings flagged ``shared_embedding``.
A mixture-of-experts model's MLP is a router (dense) and experts; with
expert parallelism ``ep`` a rank holds ``experts / ep`` of them
(``mlp.experts.local_experts.N``), flagged ``expert_parallel``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .planner import ParamSpec

CATALOG_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "models.json"


def load_catalog(path: Path = CATALOG_PATH) -> dict[str, dict]:
    return {k: v for k, v in json.loads(path.read_text()).items() if not k.startswith("_")}


def model_names(path: Path = CATALOG_PATH) -> list[str]:
    return list(load_catalog(path))


def model_specs(name: str, dtype: torch.dtype = torch.bfloat16, path: Path = CATALOG_PATH,
                ep: int = 1) -> list[ParamSpec]:
    """One rank's trainable params in ``parameters()`` order; ``ep``: expert-parallel size."""
    catalog = load_catalog(path)
    if name not in catalog:
        raise ValueError(f"model: got {name!r}, but should be one of {', '.join(catalog)}")
    a = catalog[name]
    experts = a.get("experts", 0)
    if ep < 1 or (experts and experts % ep) or (not experts and ep != 1):
        valid = f"a divisor of its {experts} experts" if experts else "1 (it has no experts)"
        raise ValueError(f"ep: got {ep!r} for {name}, but should be {valid}")
    h, bias = a["hidden"], a["bias"]
    specs: list[ParamSpec] = []

    def add(pname: str, *shape: int, shared: bool = False, expert: bool = False) -> None:
        specs.append(ParamSpec(pname, tuple(shape), dtype, shared_embedding=shared, expert_parallel=expert))

    def linear(pname: str, out: int, inp: int, expert: bool = False) -> None:
        add(f"{pname}.weight", out, inp, expert=expert)
        if bias:
            add(f"{pname}.bias", out, expert=expert)

    def norm(pname: str) -> None:
        add(f"{pname}.weight", h)
        if a["norm"] == "layernorm":
            add(f"{pname}.bias", h)

    add("embedding.word_embeddings.weight", a["vocab"], h, shared=a["tied_embeddings"])
    if a["position_embeddings"]:
        add("embedding.position_embeddings.weight", a["position_embeddings"], h)
    q = a["heads"] * a["head_dim"]
    kv = a["kv_heads"] * a["head_dim"]
    fc1 = 2 * a["ffn"] if a["gated_mlp"] else a["ffn"]
    for i in range(a["layers"]):
        layer = f"decoder.layers.{i}"
        norm(f"{layer}.input_layernorm")
        linear(f"{layer}.self_attention.linear_qkv", q + 2 * kv, h)
        linear(f"{layer}.self_attention.linear_proj", h, q)
        if not a["parallel_layers"]:
            norm(f"{layer}.pre_mlp_layernorm")
        if not experts:
            linear(f"{layer}.mlp.linear_fc1", fc1, h)
            linear(f"{layer}.mlp.linear_fc2", h, a["ffn"])
            continue
        add(f"{layer}.mlp.router.weight", experts, h)
        for j in range(experts // ep):
            expert = f"{layer}.mlp.experts.local_experts.{j}"
            linear(f"{expert}.linear_fc1", fc1, h, expert=True)
            linear(f"{expert}.linear_fc2", h, a["ffn"], expert=True)
    norm("decoder.final_layernorm")
    if not a["tied_embeddings"]:
        add("output_layer.weight", a["vocab"], h)
    return specs
