"""Reading any ``nn.Module``: ties counted once, experts cut to this rank's share, frozen params left out.

Plain torch modules built here on meta; the oracles are ``parameters()`` (what
torch counts once), shapes worked by hand, and the module's own structure.
"""

import pytest
import torch
from torch import nn

from reference.layout import ParamSpec
from reference.layout.from_module import read_module


class FusedExperts(nn.Module):
    """Experts fused into one tensor with a leading expert dimension, as transformers 5 keeps them."""

    def __init__(self, experts: int, hidden: int, ffn: int) -> None:
        super().__init__()
        self.num_experts = experts
        self.gate_up_proj = nn.Parameter(torch.empty(experts, 2 * ffn, hidden))
        self.down_proj = nn.Parameter(torch.empty(experts, hidden, ffn))


class MoE(nn.Module):
    def __init__(self, experts: nn.Module, hidden: int, count: int) -> None:
        super().__init__()
        self.gate = nn.Linear(hidden, count, bias=False)  # the router: dense
        self.experts = experts


def tied_lm(vocab=10, hidden=4, tie=True) -> nn.Module:
    model = nn.ModuleDict({"embed": nn.Embedding(vocab, hidden), "norm": nn.LayerNorm(hidden),
                           "head": nn.Linear(hidden, vocab, bias=False)})
    if tie:
        model.head.weight = model.embed.weight
    return model


def moe_model(fused: bool, experts=4, hidden=8, ffn=16) -> nn.Module:
    per_expert = nn.ModuleList(nn.Sequential(nn.Linear(hidden, ffn), nn.Linear(ffn, hidden))
                               for _ in range(experts))
    inner = FusedExperts(experts, hidden, ffn) if fused else per_expert
    return nn.Sequential(nn.Linear(hidden, hidden), MoE(inner, hidden, experts))


# The checks take a reader(model, ep) -> list[ParamSpec], so that a broken reader can be shown to fail them.

def check_counted_once(reader, model):
    specs = reader(model, 1)
    got = sum(s.numel for s in specs)
    assert got == sum(p.numel() for p in model.parameters()), "elements vs parameters()"
    assert len(specs) == len(list(model.parameters())), "tensors vs parameters()"


def check_expert_elements(reader, model, ep, expected_expert_elements):
    specs = reader(model, ep)
    got = sum(s.numel for s in specs if s.expert_parallel)
    assert got == expected_expert_elements, f"expert elements at ep={ep}: got {got}"


def real(model, ep):
    return list(read_module(model, ep=ep).specs)


def counts_ties_twice(model, ep):
    """Broken: every name a param is reachable by becomes a param of its own."""
    return [ParamSpec(n, tuple(p.shape)) for n, p in model.named_parameters(remove_duplicate=False)]


def ignores_ep(model, ep):
    """Broken: every rank holds every expert."""
    return real(model, 1)


def test_a_tie_is_one_param_flagged_shared_embedding():
    model = tied_lm()
    reading = read_module(model)
    check_counted_once(real, model)
    assert len(reading.specs) == len(list(model.named_parameters(remove_duplicate=False))) - 1
    assert reading.ties == {"embed.weight": ("head.weight",)}
    assert [s.name for s in reading.specs if s.shared_embedding] == ["embed.weight"]


def test_untied_model_has_no_shared_embedding():
    reading = read_module(tied_lm(tie=False))
    assert reading.ties == {} and not any(s.shared_embedding for s in reading.specs)
    assert len(reading.specs) == 4  # embed, norm weight and bias, head


def test_the_tie_check_catches_a_reader_that_counts_the_tie_twice():
    with pytest.raises(AssertionError, match="elements vs parameters"):
        check_counted_once(counts_ties_twice, tied_lm())


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per-expert"])
@pytest.mark.parametrize("ep", [1, 2, 4])
def test_experts_are_cut_to_this_ranks_share(fused, ep):
    """4 experts of hidden 8, ffn 16. Fused: 4 x 32 x 8 + 4 x 8 x 16 = 1536 elements; per expert (with biases)
    8 x 16 + 16 + 16 x 8 + 8 = 280, 4 x 280 = 1120. A rank of ep holds 1/ep of them."""
    whole = 1536 if fused else 1120
    check_expert_elements(real, moe_model(fused), ep, whole // ep)
    specs = real(moe_model(fused), ep)
    assert not next(s for s in specs if s.name == "1.gate.weight").expert_parallel, "the router stays dense"
    if fused:
        assert next(s for s in specs if s.name.endswith("gate_up_proj")).shape == (4 // ep, 32, 8)
    else:
        assert {s.name.split(".")[2] for s in specs if s.expert_parallel} == {str(i) for i in range(4 // ep)}


def test_the_expert_check_catches_a_reader_that_ignores_ep():
    with pytest.raises(AssertionError, match="expert elements at ep=2"):
        check_expert_elements(ignores_ep, moe_model(fused=True), 2, 1536 // 2)


def test_shared_experts_and_mixture_blocks_stay_dense_around_the_experts():
    """A block named after its experts holds its router beside them: only its ``experts`` list is cut."""

    class MixtureOfExperts(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_experts = 2
            self.router = nn.Linear(4, 2)
            self.experts = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
            self.shared_experts = nn.Linear(4, 4)

    specs = read_module(MixtureOfExperts(), ep=2).specs
    assert [(s.name, s.expert_parallel) for s in specs] == [
        ("router.weight", False), ("router.bias", False), ("experts.0.weight", True),
        ("experts.0.bias", True), ("shared_experts.weight", False), ("shared_experts.bias", False)]


def test_a_param_marked_the_upstream_way_is_a_local_expert_as_it_stands():
    model = nn.Linear(4, 4)
    model.weight.allreduce = False
    assert [(s.name, s.shape, s.expert_parallel) for s in read_module(model).specs] == [
        ("weight", (4, 4), True), ("bias", (4,), False)]


def test_frozen_params_are_left_out_and_dtype_is_the_planners():
    model = tied_lm(tie=False)
    model.norm.requires_grad_(False)
    reading = read_module(model, torch.bfloat16)
    assert reading.frozen == 2 and [s.name for s in reading.specs] == ["embed.weight", "head.weight"]
    assert {s.dtype for s in reading.specs} == {torch.bfloat16}
    assert {s.dtype for s in read_module(model).specs} == {torch.float32}


@pytest.mark.parametrize("model, ep, message", [
    (tied_lm(), 2, r"ep: got 2, but should be 1 \(the model has no experts\)"),
    (moe_model(fused=True), 3, "ep: got 3, but should be a divisor of the 4 experts of 1.experts"),
    (moe_model(fused=True), 0, "ep: got 0, but should be an integer >= 1"),
])
def test_bad_ep_is_named(model, ep, message):
    with pytest.raises(ValueError, match=message):
        read_module(model, ep=ep)


def test_an_expert_container_that_cannot_be_read_is_named():
    class Experts(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.empty(6, 4))

    with pytest.raises(ValueError, match="experts: experts .* states no expert count"):
        read_module(nn.ModuleDict({"experts": Experts()}))
    odd = Experts()
    odd.num_experts = 4
    with pytest.raises(ValueError, match=r"cannot tell how experts.w of shape \(6, 4\) holds the 4 experts"):
        read_module(nn.ModuleDict({"experts": odd}))
