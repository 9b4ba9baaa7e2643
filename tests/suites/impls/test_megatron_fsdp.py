"""The Megatron-FSDP adapter on its own, on 2 ranks: each CPU shim is needed, each strategy trains like torch DDP,
and the two live bugs of 0.6.1 still show, with their figures.

Each shim's test builds (or runs) the wrapper without that one shim and gets
the failure ``suites/impls/megatron_fsdp_cpu.py`` names; with every shim the
other tests run. The findings' tests (docs/peers.md, F7 and F8) measure
against independent sources: torch's own DDP with the same init and data,
and each rank's own gradient from a plain model, summed over the ranks.
From a release where upstream's fix is in, they assert the fix instead.
"""

import functools
import traceback
from unittest import mock

import pytest
import torch
import torch.distributed as dist
from packaging.version import Version

from reference.config import DDPConfig
from suites.impls import load_implementation, megatron_fsdp_cpu
from suites.impls import megatron_fsdp as adapter
from suites.multigpu.cases import Case
from suites.multigpu.models import batch, loss_fn, make_model
from suites.multigpu.training import train_against_torch_ddp

pytestmark = pytest.mark.skipif(adapter.implementation.unavailable is not None,
                                reason=str(adapter.implementation.unavailable))

LAST_WITH_BUGS = Version("0.6.1")
"""The newest release holding both findings (their fixes, PRs #5976 and #6357, came after it)."""
BUGGY = Version(adapter.implementation.version if adapter.implementation.unavailable is None else "0") <= LAST_WITH_BUGS


def _one_step(ctx, impl, config: DDPConfig) -> None:
    model = make_model().to(ctx.device)
    ddp = impl.wrap(model, config, ctx.group, ctx.control_group)
    tokens, labels = batch(7, 0, 0, ctx.rank)
    loss_fn(ddp(tokens), labels).backward()
    impl.finalize_model_grads([ddp])


def check_without_shim(ctx, shim: str) -> str:
    """Build and run one step with one shim left out: the failure's type and message (each rank fails alike)."""
    impl = adapter.implementation
    config = DDPConfig(overlap_grad_reduce=True, bucket_size=100)
    try:
        if shim == "current_stream":
            with mock.patch.object(megatron_fsdp_cpu, "install_current_stream", lambda: None):
                megatron_fsdp_cpu.uninstall_current_stream()
                try:
                    _one_step(ctx, impl, config)
                finally:
                    megatron_fsdp_cpu.install_current_stream()
        else:
            building = functools.partial(megatron_fsdp_cpu.building, without=(shim,))
            with mock.patch.object(megatron_fsdp_cpu, "building", building):
                _one_step(ctx, impl, config)
    except Exception as exc:  # the failure the shim is there for
        return f"{type(exc).__name__}: {exc} at {_upstream_line(exc)}"
    return "ran"


def _upstream_line(exc: BaseException) -> str:
    """The innermost frame of the package's own files that the failure passed through: ``file.py:line``."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/megatron_fsdp/" in f.filename]
    return f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else "no frame of the package"


CUDA = "Torch not compiled with CUDA enabled"
SHIM_FAILURES = {  # the first line of 0.6.1 each missing shim fails at (the forward's all-gather comes before :4029)
    "current_device": (CUDA, "megatron_fsdp.py:234"),
    "tensor_cuda": (CUDA, "uneven_dtensor.py:187"),
    "stream": ("torch.cuda.Stream requires CUDA support", "megatron_fsdp.py:406"),
    "current_stream": (CUDA, "param_and_grad_buffer.py:4558"),
}


@pytest.mark.parametrize("shim", megatron_fsdp_cpu.SHIMS)
def test_each_cpu_shim_is_needed(ranks, shim):
    """Without the shim, 0.6.1 fails at the line the shim is there for; with every shim the other tests run."""
    if torch.cuda.is_available():
        pytest.skip("the shims are for a torch without CUDA")
    failure, line = SHIM_FAILURES[shim]
    if not BUGGY:  # a later release moves the lines
        line = ""
    got = ranks.run(check_without_shim, shim)
    assert all(failure in g and g.endswith(line) for g in got), (
        f"without the {shim} shim: got {got}, but should fail with {failure!r} at {line}")


def check_fused_division(ctx) -> str:
    """The package's default ``gradient_reduce_div_fusion`` on gloo (param_and_grad_buffer.py:4746-4748)."""
    impl = adapter.implementation
    own = adapter.MegatronFSDPImplementation.ddp_config

    def fused(config, gloo=True):
        made = own(impl, config, gloo)
        made.gradient_reduce_div_fusion = True  # the package's default
        return made

    try:
        with mock.patch.object(impl, "ddp_config", fused):
            _one_step(ctx, impl, DDPConfig(overlap_grad_reduce=True, bucket_size=100))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc} at {_upstream_line(exc)}"
    return "ran"


def test_gloo_refuses_the_fused_division(ranks):
    got = ranks.run(check_fused_division)
    assert all("PREMUL_SUM with Gloo" in g for g in got), (
        f"with gradient_reduce_div_fusion: got {got}, but gloo should refuse the PREMUL_SUM reduction")


def check_strategy(ctx, name: str) -> int:
    return train_against_torch_ddp(ctx, load_implementation(name), Case("allreduce-overlap-tiny", steps=2))


@pytest.mark.parametrize("name", sorted(adapter.STRATEGIES.values()))
def test_every_strategy_trains_like_torch_ddp(ranks, name):
    """Two SGD steps, bitwise at 2 ranks: every strategy is reachable and right where no finding meets it."""
    assert ranks.run(check_strategy, name) == [2, 2]


def check_buckets(ctx, name: str) -> int:
    """The buckets Megatron-FSDP made of the model's params."""
    model = make_model().to(ctx.device)
    ddp = load_implementation(name).wrap(model, DDPConfig(overlap_grad_reduce=True, bucket_size=100), ctx.group,
                                         ctx.control_group)
    return len(ddp.raw.param_and_grad_buffer.parameter_groups)


def test_unit_modules_cut_the_buckets_under_optim_grads(ranks):
    """megatron-fsdp-optim-grads-units hands the package its unit modules, which optim_grads does not need: a
    bucket then never holds two units' params (param_and_grad_buffer.py:1726, grouped by unit), so the model's
    params fall in more buckets than the bucket size alone makes (4 and 5 in 0.6.1): the knob reaches the package."""
    plain = ranks.run(check_buckets, "megatron-fsdp-optim-grads")[0]
    units = ranks.run(check_buckets, "megatron-fsdp-optim-grads-units")[0]
    assert units > plain, (plain, units)


def check_priming(ctx) -> dict:
    """F7: what ``fully_shard_optimizer`` leaves before any real step, and Adam's params against torch DDP's."""
    impl = adapter.no_shard
    model = make_model().to(ctx.device)
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    ddp = impl.wrap(model, DDPConfig(bucket_size=100), ctx.group, ctx.control_group)
    sgd = impl.make_optimizer(ddp, lambda params: torch.optim.SGD(params, lr=1.0, weight_decay=0.01))
    masters = ddp.whole_params()
    ratio = max(float((masters[n] / init[n]).sub(0.99).abs().max()) for n in init)
    model = make_model().to(ctx.device)
    ddp = impl.wrap(model, DDPConfig(bucket_size=100), ctx.group, ctx.control_group)
    adam = impl.make_optimizer(ddp, lambda params: torch.optim.Adam(params, lr=1e-2))
    steps = {int(state["step"]) for state in adam.optimizer.state.values()}
    try:
        train_against_torch_ddp(ctx, impl, Case("allreduce-adam", optimizer="adam", steps=2))
        adam_vs_ddp = "matches"
    except AssertionError as exc:
        adam_vs_ddp = str(exc)
    del sgd
    return {"sgd_masters_off_0.99": ratio, "adam_steps_before_training": steps, "adam_vs_ddp": adam_vs_ddp}


def test_the_optimizer_priming_is_not_inert_in_0_6_1(ranks):
    """F7 (Megatron-LM #5974, fully_shard.py:502-513): the priming step on zero grads counts for Adam and decays
    the masters under weight decay before training starts."""
    got = ranks.run(check_priming)
    for rank in got:
        if BUGGY:
            assert rank["sgd_masters_off_0.99"] < 1e-6, (
                f"SGD with weight decay 0.01, lr 1: masters {rank}, but 0.6.1 leaves them at 0.99 x init right after "
                "wrapping")
            assert rank["adam_steps_before_training"] == {1}, rank
            assert "param" in rank["adam_vs_ddp"] and "differing" in rank["adam_vs_ddp"], rank
        else:
            assert rank["adam_steps_before_training"] <= {0} and rank["adam_vs_ddp"] == "matches", rank


def check_double_reduction(ctx, overlap: bool) -> float:
    """F8: no_shard, per-token (SUM) loss: the reduced grads over the sum of every rank's own grads."""
    impl = adapter.no_shard
    config = DDPConfig(overlap_grad_reduce=overlap, bucket_size=None, disable_bucketing=True,
                       calculate_per_token_loss=True)
    model, plain = make_model().to(ctx.device), make_model().to(ctx.device)
    ddp = impl.wrap(model, config, ctx.group, ctx.control_group)
    tokens, labels = batch(7, 0, 0, ctx.rank)
    loss_fn(ddp(tokens), labels, "sum").backward()
    impl.finalize_model_grads([ddp])
    named = list(plain.named_parameters())
    ours = torch.cat([g.reshape(-1) for g in ddp.reduced_grads(named)])
    loss_fn(plain(tokens), labels, "sum").backward()
    own = torch.cat([p.grad.reshape(-1) for _, p in named])
    summed = own.clone()
    dist.all_reduce(summed, group=ctx.control_group)
    nonzero = summed.abs() > 1e-6
    ratio = ours[nonzero] / summed[nonzero]
    return float(ratio.median()), float((ratio - ratio.median()).abs().max())


def test_no_shard_without_overlap_reduces_twice_in_0_6_1(ranks):
    """F8 (megatron_fsdp.py:761/:871, then :1334; PR #6357): exactly dp x the sum with a SUM loss, 1 x with overlap."""
    with_overlap = ranks.run(check_double_reduction, True)
    without = ranks.run(check_double_reduction, False)
    for median, spread in with_overlap:
        assert abs(median - 1.0) < 1e-6 and spread < 1e-4, f"with overlap: {with_overlap}, but should be the sum"
    want = ranks.world_size if BUGGY else 1.0
    for median, spread in without:
        assert abs(median - want) < 1e-6 and spread < 1e-4, (
            f"without overlap: reduced grads {median} x the sum (spread {spread}), but should be {want} x in "
            f"megatron-fsdp {adapter.implementation.version}")
