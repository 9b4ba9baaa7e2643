"""Property 9: one buffer per (param dtype, grad dtype), each param in its own dtype's buffer."""

import pytest
import torch
from hypothesis import given

from suites.params import plan_specs

from .assertions import check_equal
from .strategies import models, setups

pytestmark = pytest.mark.requires("layout")


@given(model=models(), setup=setups())
def test_one_buffer_per_dtype_pair(impl, policy, model, setup):
    buffers = plan_specs(impl, model, setup.config(policy))
    fp32 = setup.grad_reduce_in_fp32
    pairs = [(b.param_dtype, b.grad_dtype) for b in buffers]
    want = list(dict.fromkeys((s.dtype, torch.float32 if fp32 else s.dtype) for s in model))
    check_equal(pairs, want, "(param dtype, grad dtype) of each buffer, in first-seen order")
    for spec in model:
        (buf,) = [b for b in buffers if spec.name in b.param_index_map]
        check_equal(buf.param_dtype, spec.dtype, f"param dtype of the buffer holding {spec.name}")
