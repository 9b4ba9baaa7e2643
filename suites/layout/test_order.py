"""Property 4: params are laid out in reverse order of ``model.parameters()``."""

import pytest
from hypothesis import given

from suites.params import plan_specs

from .assertions import check
from .strategies import models, setups

pytestmark = pytest.mark.requires("layout")


@given(model=models(), setup=setups())
def test_layout_is_reverse_parameter_order(impl, policy, model, setup):
    order = [s.name for s in model]
    for buf in plan_specs(impl, model, setup.config(policy)):
        names = sorted(buf.param_index_map, key=order.index)  # parameters() order
        for a, b in zip(names, names[1:]):
            (sa, _, ba), (sb, _, bb) = buf.param_index_map[a], buf.param_index_map[b]
            check(sa > sb, f"start of {a} (before {b} in parameters())", sa, f"> start of {b} ({sb})")
            check(ba >= bb, f"bucket of {a}", ba, f">= bucket of {b} ({bb})")
