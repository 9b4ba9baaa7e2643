"""Real model shapes from ``fixtures/models.json``, expanded into ``ParamSpec`` lists.

Parameter granularity matters for padding (each param start is aligned), so
the expansion follows megatron-core's module layout: fused QKV, fused
gate/up projection for gated MLPs, one norm per sub-layer (one per layer
with parallel attention/MLP), tied embeddings flagged ``shared_embedding``.
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


def model_specs(name: str, dtype: torch.dtype = torch.bfloat16, path: Path = CATALOG_PATH) -> list[ParamSpec]:
    """The model's trainable params in ``parameters()`` order."""
    catalog = load_catalog(path)
    if name not in catalog:
        raise ValueError(f"model: got {name!r}, but should be one of {', '.join(catalog)}")
    a = catalog[name]
    h, bias = a["hidden"], a["bias"]
    specs: list[ParamSpec] = []

    def add(pname: str, *shape: int, shared: bool = False) -> None:
        specs.append(ParamSpec(pname, tuple(shape), dtype, shared_embedding=shared))

    def linear(pname: str, out: int, inp: int) -> None:
        add(f"{pname}.weight", out, inp)
        if bias:
            add(f"{pname}.bias", out)

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
        linear(f"{layer}.mlp.linear_fc1", fc1, h)
        linear(f"{layer}.mlp.linear_fc2", h, a["ffn"])
    norm("decoder.final_layernorm")
    if not a["tied_embeddings"]:
        add("output_layer.weight", a["vocab"], h)
    return specs
