"""The step benchmarks measure only the implementations that can run their configuration."""

from types import SimpleNamespace

import pytest

from benchmarks.measuring import implementations_for
from benchmarks.measuring.emulation import step_config


def test_an_implementation_whose_table_refuses_the_step_configuration_is_left_out():
    pytest.importorskip("deepspeed", reason="needs DeepSpeed installed: ZeRO-1 is the peer that refuses overlap")
    config = step_config(SimpleNamespace(bucket_elements=1024))
    got = [i.name for i in implementations_for(["reference", "torch", "deepspeed-zero1", "deepspeed"], config)]
    assert got == ["reference", "torch", "deepspeed"], (
        f"got {got}, but should leave out deepspeed-zero1 alone (ZeRO-1 cannot overlap its reduction; wrapping it "
        "with overlap_grad_reduce=True raises inside the benchmark)")
