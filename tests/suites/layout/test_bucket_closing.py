"""The boundary property of suites/layout/test_bucket_closing.py checks something on every example.

It used to draw the first k params in layout order whatever their dtypes and check only where one buffer
held all k: an example spread over two dtypes checked nothing and passed.
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fixtures.broken.closing_off_by_one import implementation as closing_off_by_one
from reference.layout import LayoutConfig, ParamSpec
from suites.impls.reference import implementation as reference
from suites.layout.test_bucket_closing import boundary_cases, check_first_bucket_holds_exactly
from suites.params import plan_specs

# parameters() order; in layout order (reversed) the first two are c (fp32) then b (bf16): two buffers
SPREAD = [ParamSpec("a", (30,), torch.float32), ParamSpec("b", (20,), torch.bfloat16),
          ParamSpec("c", (10,), torch.float32)]
SAME = [ParamSpec("a", (30,), torch.float32), ParamSpec("b", (20,), torch.float32),
        ParamSpec("c", (10,), torch.float32)]


def test_params_no_buffer_holds_together_fail_not_pass():
    """The old draw's case: the first two in layout order lie in two buffers, so no buffer is checked."""
    buffers = plan_specs(reference, SPREAD, LayoutConfig(bucket_size=30))
    with pytest.raises(AssertionError, match=r"got 0 of 2, but should check at least one"):
        check_first_bucket_holds_exactly(buffers, ["c", "b"], 30)


def test_the_first_params_of_one_buffer_fill_its_first_bucket_exactly():
    """Worked by hand: layout order c (10), b (20), a (30); bucket_size 30 = c + b closes bucket 0 after b."""
    assert check_first_bucket_holds_exactly(plan_specs(reference, SAME, LayoutConfig(bucket_size=30)),
                                            ["c", "b"], 30) == 1


def test_a_bucket_closing_one_element_late_is_caught():
    buffers = plan_specs(closing_off_by_one, SAME, LayoutConfig(bucket_size=30))
    with pytest.raises(AssertionError, match="params in the first bucket with bucket_size=30"):
        check_first_bucket_holds_exactly(buffers, ["c", "b"], 30)


@pytest.mark.parametrize("policy", ["packed", "padded"])
@given(data=st.data())
def test_every_drawn_case_has_a_buffer_to_check(policy, data):
    """Whatever the dtypes drawn, the first params drawn share one dtype, hence one buffer."""
    model, first, end, dp = data.draw(boundary_cases(policy))
    dtypes = {spec.dtype for spec in model if spec.name in first}
    assert len(dtypes) == 1, f"dtypes of the first params {first}: got {dtypes}, but should be one"
    config = LayoutConfig(dp=dp, policy=policy, bucket_size=end)
    assert check_first_bucket_holds_exactly(plan_specs(reference, model, config), first, end) == 1
