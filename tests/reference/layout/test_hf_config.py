"""Hugging Face configs built on meta and read: torch's totals, the catalogue's models, megatron's layout.

Configs are written here (published values, layers cut to 2 where noted); no
download. The oracles: ``parameters()`` of the meta model, the catalogue's
own expansion (megatron-core's module layout, fixtures/models.json), and
megatron-core's buffer.
"""

import json
from pathlib import Path

import pytest
import torch

from reference.layout import LayoutConfig, ParamSpec, plan_layout
from reference.layout.catalog import load_catalog, model_specs
from reference.layout.from_module import read_module
from reference.layout.hf_config import apply_sets, build_meta_model, parse_sets, read_config

from tests.pytest_run import ROOT
from suites.impls.support import why_not

transformers = pytest.importorskip("transformers",
                                   reason="--config builds models with transformers, which is not installed")

SMALL_LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 8,
               "num_key_value_heads": 2, "vocab_size": 1003, "intermediate_size": 688,
               "tie_word_embeddings": True}
LLAMA2_7B = {  # meta-llama/Llama-2-7b-hf config.json, as published
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 11008, "max_position_embeddings": 4096, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
    "vocab_size": 32000, "torch_dtype": "float16"}
MIXTRAL_8X7B = {  # mistralai/Mixtral-8x7B-v0.1 config.json, as published
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
    "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "num_local_experts": 8, "rms_norm_eps": 1e-05, "rope_theta": 1e6, "tie_word_embeddings": False,
    "vocab_size": 32000}
SMALL_MOE = {**MIXTRAL_8X7B, "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
             "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 100}


def write(tmp_path: Path, fields: dict, name="config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(fields))
    return path


def build(tmp_path, fields, *sets):
    return build_meta_model(write(tmp_path, fields), sets)[1]


# -- totals and ties: sum(p.numel()) over the deduplicated meta params is the oracle ---------------------

def check_totals(reader, model):
    got = sum(s.numel for s in reader(model))
    assert got == sum(p.numel() for p in model.parameters()), f"trainable elements: got {got:,}"


def check_one_tensor_fewer(reader, model):
    got = len(reader(model))
    aliased = len(list(model.named_parameters(remove_duplicate=False)))
    assert got == aliased - 1, f"tensors: got {got}, but a tie should make one fewer than {aliased}"


def reader(model, ep=1):
    return read_module(model, torch.bfloat16, ep=ep).specs


def counts_ties_twice(model, ep=1):
    """Broken: reads every name, so the tied lm_head.weight is a second tensor."""
    return [ParamSpec(n, tuple(p.shape)) for n, p in model.named_parameters(remove_duplicate=False)]


@pytest.mark.parametrize("fields", [SMALL_LLAMA, {**SMALL_LLAMA, "tie_word_embeddings": False}, SMALL_MOE],
                         ids=["llama-tied", "llama-untied", "mixtral-small"])
def test_trainable_elements_are_what_torch_counts(tmp_path, fields):
    check_totals(reader, build(tmp_path, fields))


def test_known_llama_facts_and_the_tie(tmp_path):
    """Checked beside this test with torch alone: 2,335,232 elements, 29 tensors, 30 names."""
    model = build(tmp_path, SMALL_LLAMA)
    reading = read_module(model, torch.bfloat16)
    assert sum(s.numel for s in reading.specs) == 2_335_232 and len(reading.specs) == 29
    check_one_tensor_fewer(reader, model)
    assert reading.ties == {"model.embed_tokens.weight": ("lm_head.weight",)}
    assert [s.name for s in reading.specs if s.shared_embedding] == ["model.embed_tokens.weight"]
    untied = read_module(build(tmp_path, {**SMALL_LLAMA, "tie_word_embeddings": False}), torch.bfloat16)
    assert not any(s.shared_embedding for s in untied.specs) and len(untied.specs) == 30


def test_the_tie_checks_catch_a_reader_that_counts_the_tie_twice(tmp_path):
    model = build(tmp_path, SMALL_LLAMA)
    with pytest.raises(AssertionError, match="trainable elements"):
        check_totals(counts_ties_twice, model)
    with pytest.raises(AssertionError, match="a tie should make one fewer"):
        check_one_tensor_fewer(counts_ties_twice, model)


# -- experts: the config's numbers are the oracle ------------------------------------------------------------

def expert_elements_by_hand(fields, ep):
    """Per layer and expert: gate and up (2 x ffn x hidden) and down (hidden x ffn)."""
    h, f = fields["hidden_size"], fields["intermediate_size"]
    return fields["num_hidden_layers"] * fields["num_local_experts"] // ep * 3 * f * h


def check_expert_count(reader, model, fields, ep):
    specs = reader(model, ep)
    got = sum(s.numel for s in specs if s.expert_parallel)
    assert got == expert_elements_by_hand(fields, ep), f"expert elements at ep={ep}: got {got:,}"
    routers = [s for s in specs if s.name.endswith("mlp.gate.weight")]
    assert routers and not any(s.expert_parallel for s in routers), "the routers should stay dense"


def ignores_ep(model, ep):
    """Broken: every rank holds all the experts."""
    return reader(model, 1)


@pytest.mark.parametrize("ep", [1, 2, 8])
def test_mixtral_experts_are_cut_to_this_ranks_share(tmp_path, ep):
    check_expert_count(reader, build(tmp_path, SMALL_MOE), SMALL_MOE, ep)


def test_the_expert_check_catches_a_reader_that_ignores_ep(tmp_path):
    with pytest.raises(AssertionError, match="expert elements at ep=2"):
        check_expert_count(ignores_ep, build(tmp_path, SMALL_MOE), SMALL_MOE, 2)


SMALL = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "vocab_size": 100, "intermediate_size": 128}
MOE_FAMILIES = {  # transformers 5 keeps experts fused with a leading expert dimension, or one module each
    "qwen2_moe": {**SMALL, "num_experts": 8, "moe_intermediate_size": 32,
                  "shared_expert_intermediate_size": 64},  # and a shared expert, dense
    "gpt_oss": {**SMALL, "num_local_experts": 8, "head_dim": 16},  # fused, with fused biases
    "deepseek_v3": {**SMALL, "n_routed_experts": 8, "moe_intermediate_size": 32, "n_shared_experts": 1,
                    "first_k_dense_replace": 1, "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8,
                    "qk_nope_head_dim": 8, "v_head_dim": 8, "n_group": 2, "topk_group": 1},
    "switch_transformers": {"d_model": 32, "d_ff": 64, "num_layers": 2, "num_decoder_layers": 2,
                            "num_heads": 2, "d_kv": 8, "vocab_size": 100, "num_experts": 8,
                            "encoder_sparse_step": 1,
                            "decoder_sparse_step": 1},  # a ModuleDict of one module per expert
}


def named_experts(model) -> dict[str, int]:
    """By transformers' own naming: a routed expert's param is under ``.experts.``, a shared one is not."""
    return {n: p.numel() for n, p in model.named_parameters() if ".experts." in n}


@pytest.mark.parametrize("model_type", MOE_FAMILIES)
def test_every_moe_family_puts_its_routed_experts_and_only_them_in_expert_buffers(tmp_path, model_type):
    model = build(tmp_path, {"model_type": model_type, **MOE_FAMILIES[model_type]})
    expected = named_experts(model)
    assert expected, "the family should have routed experts"
    check_totals(reader, model)
    whole, half = reader(model, 1), reader(model, 2)
    assert {s.name for s in whole if s.expert_parallel} == set(expected)
    assert sum(s.numel for s in half if s.expert_parallel) == sum(expected.values()) // 2
    assert [s for s in half if not s.expert_parallel] == [s for s in whole if not s.expert_parallel], (
        "routers, shared experts and every other dense param are the same on every expert-parallel rank")


# -- the catalogue's models, built from their published configs ---------------------------------------------

LAYER_MAP = {  # megatron-core's param in a layer <- transformers' params, concatenated along dim 0
    "input_layernorm.weight": ("input_layernorm.weight",),
    "self_attention.linear_qkv.weight": ("self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                         "self_attn.v_proj.weight"),
    "self_attention.linear_proj.weight": ("self_attn.o_proj.weight",),
    "pre_mlp_layernorm.weight": ("post_attention_layernorm.weight",),
    "mlp.linear_fc1.weight": ("mlp.gate_proj.weight", "mlp.up_proj.weight"),
    "mlp.linear_fc2.weight": ("mlp.down_proj.weight",),
    "mlp.router.weight": ("mlp.gate.weight",),
    "mlp.experts.local_experts.{j}.linear_fc1.weight": ("mlp.experts.gate_up_proj[{j}]",),
    "mlp.experts.local_experts.{j}.linear_fc2.weight": ("mlp.experts.down_proj[{j}]",),
}
OUTER_MAP = {"embedding.word_embeddings.weight": ("model.embed_tokens.weight",),
             "decoder.final_layernorm.weight": ("model.norm.weight",),
             "output_layer.weight": ("lm_head.weight",)}


def fused_shapes(hf: list[ParamSpec]) -> dict[str, tuple[int, ...]]:
    """transformers' params fused as megatron-core fuses them: q/k/v and gate/up concatenated, fused experts
    split into one tensor per expert. Every transformers param is used once, or the mapping fails."""
    shapes = {s.name: s.shape for s in hf}
    for s in hf:
        if ".mlp.experts." in s.name:  # (experts, ...) -> one (...) per expert
            shapes.update({f"{s.name}[{j}]": s.shape[1:] for j in range(s.shape[0])})
    used, fused = set(), {}
    layers = {int(n.split(".")[2]) for n in shapes if n.startswith("model.layers.")}
    rules = [(m, parts) for m, parts in OUTER_MAP.items()]
    rules += [(f"decoder.layers.{i}.{m}", tuple(f"model.layers.{i}.{p}" for p in parts))
              for i in sorted(layers) for m, parts in LAYER_MAP.items()]
    for megatron_name, parts in rules:
        for j in range(64) if "{j}" in megatron_name else [None]:
            names = [p.format(j=j) for p in parts]
            if not all(n in shapes for n in names):
                break
            rows = sum(shapes[n][0] for n in names)
            assert len({shapes[n][1:] for n in names}) == 1, f"{names}: shapes {[shapes[n] for n in names]}"
            fused[megatron_name.format(j=j)] = (rows, *shapes[names[0]][1:])
            used.update(names)
    whole = {s.name for s in hf}
    unused = whole - used - {n for n in whole if any(u.startswith(f"{n}[") for u in used)}
    assert not unused, f"transformers params that map to no megatron-core param: {sorted(unused)}"
    return fused


def catalogue(tmp_path, name, layers):
    models = load_catalog()
    path = tmp_path / "models.json"
    path.write_text(json.dumps({name: {**models[name], "layers": layers}}))
    return path


def check_same_once_fused(ours: list[ParamSpec], theirs: list[ParamSpec]):
    assert sum(s.numel for s in ours) == sum(s.numel for s in theirs), "total param elements"
    assert fused_shapes(ours) == {s.name: s.shape for s in theirs}, "params once fused"
    assert ({s.name for s in theirs if s.expert_parallel}
            == set(fused_shapes([s for s in ours if s.expert_parallel]))), "expert params"


@pytest.mark.parametrize("name, fields, ep", [("llama2-7b", LLAMA2_7B, 1), ("mixtral-8x7b", MIXTRAL_8X7B, 1),
                                              ("mixtral-8x7b", MIXTRAL_8X7B, 4)])
def test_catalogue_models_from_published_configs_match_once_fused(tmp_path, name, fields, ep):
    """Two layers of each: the same elements in all, and param for param the same shapes once q/k/v and
    gate/up are fused and fused experts split per expert (megatron-core's module layout)."""
    ours = list(read_module(build(tmp_path, {**fields, "num_hidden_layers": 2}), torch.bfloat16, ep=ep).specs)
    check_same_once_fused(ours, model_specs(name, path=catalogue(tmp_path, name, 2), ep=ep))


@pytest.mark.parametrize("broken", ["drops v_proj", "v_proj half its rows", "experts for all ranks"])
def test_the_fused_comparison_catches_a_broken_reading(tmp_path, broken):
    fields = MIXTRAL_8X7B if broken == "experts for all ranks" else LLAMA2_7B
    ours = list(read_module(build(tmp_path, {**fields, "num_hidden_layers": 2}), ep=1).specs)
    if broken == "drops v_proj":
        ours = [s for s in ours if "v_proj" not in s.name]
    elif broken == "v_proj half its rows":
        ours = [ParamSpec(s.name, (s.shape[0] // 2, *s.shape[1:])) if "v_proj" in s.name else s for s in ours]
    name, ep = ("mixtral-8x7b", 2) if fields is MIXTRAL_8X7B else ("llama2-7b", 1)
    with pytest.raises(AssertionError):
        check_same_once_fused(ours, model_specs(name, path=catalogue(tmp_path, name, 2), ep=ep))


def test_the_shipped_70b_config_matches_the_catalogue():
    """fixtures/configs/llama-2-70b.json, all 80 layers on meta: 68,976,648,192 elements, as the catalogue."""
    model = build_meta_model(ROOT / "fixtures" / "configs" / "llama-2-70b.json")[1]
    got = sum(s.numel for s in read_module(model).specs)
    assert got == sum(s.numel for s in model_specs("llama2-70b")) == 68_976_648_192


def test_full_llama2_7b_matches_the_catalogue(tmp_path):
    got = sum(s.numel for s in read_module(build(tmp_path, LLAMA2_7B)).specs)
    assert got == sum(s.numel for s in model_specs("llama2-7b")) == 6_738_415_616


# -- megatron-core lays the read params out as the planner does ----------------------------------------------

def megatron_or_skip():
    from suites.impls.megatron_core import implementation as megatron

    if megatron.unavailable:
        pytest.skip(megatron.unavailable)
    return megatron


def layout_fields(buf):
    return (buf.param_dtype, buf.grad_dtype, buf.numel, buf.numel_unpadded, buf.expert_parallel,
            [tuple(b) for b in buf.bucket_indices], list(buf.per_bucket_numel_unpadded),
            {n: tuple(v) for n, v in buf.param_index_map.items()})


def megatron_layout(specs, config):
    from suites.params import plan_specs

    return [layout_fields(b) for b in plan_specs(megatron_or_skip(), specs, config)]


@pytest.mark.parametrize("fields, ep", [
    (SMALL_LLAMA, 1), ({**SMALL_LLAMA, "tie_word_embeddings": False}, 1), (SMALL_MOE, 2),
], ids=["llama-tied", "llama-untied", "mixtral-small-ep2"])
@pytest.mark.parametrize("policy", ["packed", "padded", "high-busbw", "shard-aligned"])
@pytest.mark.parametrize("bucket_size", [150_000, None], ids=["buckets", "one-bucket"])
def test_megatron_core_lays_the_read_params_out_identically(tmp_path, fields, ep, policy, bucket_size):
    megatron = megatron_or_skip()
    config = LayoutConfig(dp=4, policy=policy, bucket_size=bucket_size, expert_dp=4 // ep)
    reason = why_not(megatron, config)
    if reason:
        pytest.skip(reason)
    specs = reader(build(tmp_path, fields), ep)
    assert megatron_layout(specs, config) == [layout_fields(b) for b in plan_layout(specs, config).buffers]


def test_the_megatron_comparison_catches_a_reading_that_drops_the_tie_flag(tmp_path):
    """Upstream gives the shared embedding a bucket of its own under the distributed optimizer."""
    specs = reader(build(tmp_path, SMALL_LLAMA))
    unflagged = [ParamSpec(s.name, s.shape, s.dtype) for s in specs]
    config = LayoutConfig(dp=4, policy="padded", bucket_size=None)
    ours = [layout_fields(b) for b in plan_layout(unflagged, config).buffers]
    assert megatron_layout(specs, config) != ours


# -- the config file and its overrides ---------------------------------------------------------------------

def test_a_directory_holding_config_json_is_read(tmp_path):
    write(tmp_path, SMALL_LLAMA)
    assert read_config(tmp_path) == (tmp_path / "config.json", SMALL_LLAMA)


def test_sets_override_parse_json_and_reach_nested_fields():
    fields = {"model_type": "llama", "num_hidden_layers": 2, "rope_scaling": {"factor": 2.0}}
    got = apply_sets(fields, parse_sets(["num_hidden_layers=80", "rope_scaling.factor=8", "hidden_act=gelu",
                                         "head_dim=64"]), known={"head_dim", "hidden_act"})
    assert got == {"model_type": "llama", "num_hidden_layers": 80, "rope_scaling": {"factor": 8},
                   "hidden_act": "gelu", "head_dim": 64}
    assert fields["num_hidden_layers"] == 2, "the file's fields are not changed"


def test_set_builds_the_overridden_model(tmp_path):
    model = build(tmp_path, SMALL_LLAMA, "num_hidden_layers=1")
    assert len(model.model.layers) == 1


@pytest.mark.parametrize("sets, message", [
    (["num_hidden_layer=4"], "--set: got the key 'num_hidden_layer', but the config has no such field; "
                             "close: num_hidden_layers"),
    (["layers"], "--set: got 'layers', but should be key=value"),
    (["=3"], "--set: got '=3', but should be key=value"),
    (["num_hidden_layers.x=1"],
     "--set: got 'num_hidden_layers.x', but num_hidden_layers is not a nested object"),
])
def test_bad_sets_are_named(tmp_path, sets, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        build(tmp_path, SMALL_LLAMA, *sets)
