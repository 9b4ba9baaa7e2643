"""The step benchmarks measure only the implementations that can run their configuration over their transport."""

from types import SimpleNamespace

import pytest

from benchmarks.measuring import implementations_for
from benchmarks.measuring.emulation import step_config
from ranks.context import Transport

CONFIG = step_config(SimpleNamespace(bucket_elements=1024))
CPU = SimpleNamespace(transport=Transport("gloo", "cpu"))


def test_an_implementation_whose_table_refuses_the_step_configuration_is_left_out():
    pytest.importorskip("deepspeed", reason="needs DeepSpeed installed: ZeRO-1 is the peer that refuses overlap")
    got = [i.name for i in implementations_for(["reference", "torch", "deepspeed-zero1", "deepspeed"], CONFIG, CPU)]
    assert got == ["reference", "torch", "deepspeed"], (
        f"got {got}, but should leave out deepspeed-zero1 alone (ZeRO-1 cannot overlap its reduction; wrapping it "
        "with overlap_grad_reduce=True raises inside the benchmark)")


def test_an_implementation_whose_table_refuses_the_transport_is_left_out():
    pytest.importorskip("megatron.core", reason="needs megatron-core installed: it is the peer that refuses gloo+cuda")
    shared_gpu = SimpleNamespace(transport=Transport("gloo", "cuda"))
    got = {t: [i.name for i in implementations_for(["reference", "megatron"], CONFIG, ctx)]
           for t, ctx in (("gloo+cpu", CPU), ("gloo+cuda", shared_gpu))}
    assert got == {"gloo+cpu": ["reference", "megatron"], "gloo+cuda": ["reference"]}, (
        f"got {got}, but megatron-core should be left out over gloo with CUDA tensors alone (its coalesced "
        "all-reduce raises there)")
