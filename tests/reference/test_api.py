"""The reference's public helpers and defaults, each against upstream's or torch's stated value.

The suites reach the reference only through its adapter, which always passes
every argument; a user of the reference relies on the defaults checked here.
"""

import dataclasses
import inspect

import pytest
import torch

from reference.config import DDPConfig
from reference.ddp import DistributedDataParallel
from reference.layout import LayoutConfig, ParamSpec, default_bucket_size, plan_buffer, plan_layout
from reference.optimizer import ReferenceOptimizer


@pytest.mark.parametrize("dp, elements",
                         [(1, 40_000_000), (40, 40_000_000), (41, 41_000_000), (64, 64_000_000)])
def test_default_bucket_size_is_upstreams(dp, elements):
    """Upstream: max(40M, 1M * dp) elements, so the 1M-per-rank term wins from dp = 41 on."""
    got = default_bucket_size(dp)
    assert got == elements, f"default bucket size at dp={dp}: got {got}, but should be {elements}"


def test_a_param_is_dense_unless_marked():
    """Upstream treats a param as expert-parallel only when it carries ``allreduce = False``."""
    spec = ParamSpec("w", (4, 4))
    layout = plan_layout([spec], LayoutConfig(dp=2, policy="padded", expert_dp=1))
    kinds = [b.expert_parallel for b in layout.buffers]
    assert kinds == [False], f"buffers' expert_parallel: got {kinds}, but an unmarked param should be dense"
    alone = plan_buffer([spec], LayoutConfig(dp=2), torch.float32, torch.float32)
    assert alone.expert_parallel is False, "plan_buffer without expert_parallel should plan a dense buffer"


def test_clipping_defaults_to_the_l2_norm_as_torch_does():
    ours = inspect.signature(ReferenceOptimizer).parameters["norm_type"].default
    theirs = inspect.signature(torch.nn.utils.clip_grad_norm_).parameters["norm_type"].default
    assert ours == theirs == 2.0, f"default norm_type: got {ours}, but should be torch's {theirs}"


@pytest.mark.parametrize("config, field", [
    (LayoutConfig(dp=8, policy="padded", bucket_size=1000), "bucket_size"),
    (DDPConfig(bucket_size=1000), "bucket_size"),
])
def test_a_validated_config_cannot_be_made_invalid_afterwards(config, field):
    """Validation runs once, at construction: a config that could change later could skip it."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(config, field, 0)


def test_bucket_param_names_hold_past_256_buckets():
    """300 one-element params, one bucket each, reverse order: bucket i holds param 299 - i (ints beyond
    CPython's small-int cache compare by value only)."""
    specs = [ParamSpec(f"p{i}", (1,)) for i in range(300)]
    (buffer,) = plan_layout(specs, LayoutConfig(bucket_size=1)).buffers
    got = {i: buffer.bucket_param_names(i) for i in range(buffer.num_buckets)}
    want = {i: [f"p{299 - i}"] for i in range(300)}
    assert got == want, f"bucket 280's params: got {got.get(280)}, but should be {want[280]}"


def test_the_grad_norm_of_any_positive_order_and_none_other():
    """``grad_norm`` takes any norm type above 0: the L1 norm of (3, -4) is 7, the L2 5, the inf 4 (worked by
    hand); 0 and below are refused by name."""
    from reference.clip import grad_norm

    grads = [torch.tensor([3.0, -4.0])]
    got = {p: grad_norm(grads, p, None, torch.device("cpu")) for p in (1.0, 2.0, float("inf"))}
    assert got == pytest.approx({1.0: 7.0, 2.0: 5.0, float("inf"): 4.0}), got
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match=f"norm_type: got {bad!r}, but should be a positive number or inf"):
            grad_norm(grads, bad, None, torch.device("cpu"))


@pytest.mark.parametrize("threshold", [0.0, -1.0, float("nan")])
def test_a_skip_threshold_must_be_positive(threshold):
    """A grad norm is never negative, so a threshold of 0 or below would skip every step: refused by name
    (the suites' cases skip above 0.01 and above 100)."""
    with pytest.raises(ValueError, match="grad_norm_skip_threshold: got .*, but should be a positive number"):
        ReferenceOptimizer(None, None, grad_norm_skip_threshold=threshold)


# megatron-core's DistributedDataParallelConfig defaults (0.19.2), each knob under this project's name.
UPSTREAM_DDP_DEFAULTS = {
    "policy": "packed",  # use_distributed_optimizer=False, pad_buckets_for_high_nccl_busbw=False
    "bucket_size": None, "disable_bucketing": False, "overlap_grad_reduce": False, "overlap_param_gather": False,
    "average_in_collective": False, "grad_reduce_in_fp32": False, "calculate_per_token_loss": False,
    "check_for_nan_in_grad": False, "num_distributed_optimizer_instances": 1,
    "reduce_scatter_with_fp32_accumulation": False, "param_name_patterns_for_fp32_local_accumulation": (),
}


def test_ddp_config_defaults_are_upstreams():
    """A user who sets nothing gets what upstream's config gives (plus one bucket per group, and the agreement
    across ranks that makes a one-rank problem fail every rank)."""
    got = DDPConfig().as_dict()
    assert {k: got[k] for k in UPSTREAM_DDP_DEFAULTS} == UPSTREAM_DDP_DEFAULTS, got
    assert (got["buckets_per_group"], got["check_across_ranks"]) == (1, True), got


@pytest.mark.parametrize("overlap, disable, buckets", [
    (True, False, 100), (True, True, None), (False, False, None), (False, True, None)])
def test_one_bucket_per_buffer_without_overlap_or_with_bucketing_disabled(overlap, disable, buckets):
    """Upstream: bucket_size becomes None (one bucket) when overlap_grad_reduce is off, and under
    disable_bucketing; otherwise the configured size."""
    config = DDPConfig(bucket_size=100, overlap_grad_reduce=overlap, disable_bucketing=disable)
    got = config.layout_config(2).bucket_size
    assert got == buckets, f"planned bucket size (overlap {overlap}, disable_bucketing {disable}): got {got}"


def test_the_distributed_optimizer_counts_and_steps_every_param_past_256_buckets(group):
    """300 one-element params, one bucket each, padded for the distributed optimizer at one rank, a loss of
    sum(params): the grad norm is sqrt(300), and SGD with lr 1 takes 1 from every param, buckets past CPython's
    small-int cache included."""
    params = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(1)) for _ in range(300))
    ddp = DistributedDataParallel(params, DDPConfig(policy="padded", bucket_size=1, overlap_grad_reduce=True), group)
    opt = ReferenceOptimizer(ddp, lambda ps: torch.optim.SGD(ps, lr=1.0), max_grad_norm=1e9)
    sum(p.sum() for p in params).backward()
    ddp.finish_grad_sync()
    norm = opt.step()
    assert norm == pytest.approx(300 ** 0.5), f"grad norm: got {norm}, but should be sqrt(300) = {300 ** 0.5:.6f}"
    unchanged = [i for i, p in enumerate(params) if p.item() != -1.0]
    assert not unchanged, f"params not stepped: got {unchanged[:5]} ({len(unchanged)}), but should be none"


def test_fp32_local_accumulation_of_all_matches_every_param_whatever_string_object_says_all():
    """'all' read from a config file is equal to the literal, not the same object: it still means every param."""
    every = "".join(["al", "l"])
    config = DDPConfig(param_name_patterns_for_fp32_local_accumulation=(every,))
    assert config.accumulates_in_fp32("layers.0.weight"), "got False for 'layers.0.weight', but should be True"


def test_a_grad_norm_equal_to_the_skip_threshold_still_steps(group):
    """Upstream skips only above the threshold (``grad_norm > threshold``): grads (3, 4) have norm 5 exactly."""
    param = torch.nn.Parameter(torch.zeros(2))
    ddp = DistributedDataParallel(torch.nn.ParameterList([param]), DDPConfig(), group)
    opt = ReferenceOptimizer(ddp, lambda ps: torch.optim.SGD(ps, lr=1.0), grad_norm_skip_threshold=5.0)
    assert not opt.skipped, "skipped before any step: got True, but should be False"
    (param * torch.tensor([3.0, 4.0])).sum().backward()
    ddp.finish_grad_sync()
    norm = opt.step()
    assert norm == 5.0 and not opt.skipped, f"norm {norm}, skipped: got {opt.skipped}, but should be False"
    assert param.tolist() == [-3.0, -4.0], f"param: got {param.tolist()}, but should be [-3.0, -4.0]"


def test_a_rank_with_no_grad_elements_adds_nothing_to_the_inf_norm():
    """A rank whose share is empty (it owns only padding) takes part in the MAX with 0, not with any other value:
    the global inf-norm of (0.25, -0.5) is 0.5 (worked by hand)."""
    from reference.clip import grad_norm

    cpu = torch.device("cpu")
    assert grad_norm([], float("inf"), None, cpu) == 0.0
    assert grad_norm([torch.zeros(0), torch.tensor([0.25, -0.5])], float("inf"), None, cpu) == 0.5


def test_clipping_scales_by_max_norm_over_norm_plus_1e_6_and_only_below_1():
    """Upstream's coefficient ``max_norm / (total_norm + 1e-6)``, worked by hand: 1 / 5.000001 = 0.19999996 scales
    (3, 4) to (0.59999988, 0.79999984) within fp32 rounding; a coefficient of 1.5 / 1.000001, above 1, leaves grads as they are."""
    from reference.clip import clip_by_total_norm

    grads = torch.tensor([3.0, 4.0])
    clip_by_total_norm([grads], 1.0, 5.0)
    assert grads.tolist() == pytest.approx([0.59999988, 0.79999984], abs=7e-8), grads.tolist()  # one fp32 ulp
    grads = torch.tensor([3.0, 4.0])
    clip_by_total_norm([grads], 1.5, 1.0)
    assert grads.tolist() == [3.0, 4.0], f"grads: got {grads.tolist()}, but should be unchanged"


def test_a_bucket_group_of_300_params_launches_when_its_last_grad_is_in(group):
    """With overlap, a group launches during backward once every one of its params' grads is in, however many
    (counts past CPython's small-int cache compare by value only)."""
    params = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(1)) for _ in range(300))
    ddp = DistributedDataParallel(params, DDPConfig(bucket_size=10_000, overlap_grad_reduce=True), group)
    sum(p.sum() for p in params).backward()
    (bucket_group,) = ddp.bucket_groups
    assert bucket_group.launched, "launched after backward: got False, but should be True (its 300 grads are in)"


def test_a_nan_in_any_bucket_of_a_group_is_reported(group):
    """Two one-param buckets in one bucket group: the NaN check looks at every bucket, not only up to the first
    finite one (bucket 0 holds the last param, finite; bucket 1 the first, NaN)."""
    from reference.bucket_group import GradSyncError

    params = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(1)) for _ in range(2))
    config = DDPConfig(bucket_size=1, overlap_grad_reduce=True, buckets_per_group=2, check_for_nan_in_grad=True)
    ddp = DistributedDataParallel(params, config, group)
    (params[0].sum() * float("nan") + params[1].sum()).backward()
    with pytest.raises(GradSyncError, match="NaN in the gradient of '0'"):
        ddp.finish_grad_sync()
