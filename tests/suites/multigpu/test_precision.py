"""The fp32 main_grad checks of suites/multigpu/test_precision.py check something: a configuration whose
patterns match no param fails them instead of passing them with nothing checked."""

import pytest
import torch

from reference.config import DDPConfig
from suites.multigpu.test_precision import check_fp32_main_grads_are_zero, fp32_accumulating

WEIGHTS = DDPConfig(param_name_patterns_for_fp32_local_accumulation=("*.weight",))
NOTHING = DDPConfig(param_name_patterns_for_fp32_local_accumulation=("decoder.*",))


def model_with_main_grads(value: float) -> torch.nn.Module:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    for param in model.parameters():
        param.main_grad = torch.full(param.shape, value, dtype=torch.float32)
    return model


def test_the_params_the_patterns_name_are_found():
    names = [name for name, _ in fp32_accumulating(model_with_main_grads(0.0), WEIGHTS, 0)]
    assert names == ["0.weight", "1.weight"], names


def test_patterns_that_match_no_param_fail_not_pass():
    with pytest.raises(AssertionError, match=r"rank 0 params matching \('decoder.\*',\): got 0 of 4 .*, but "
                                             r"should check at least one"):
        check_fp32_main_grads_are_zero(model_with_main_grads(0.0), NOTHING, 0)


def test_zeroed_main_grads_pass_and_a_nonzero_one_is_caught():
    check_fp32_main_grads_are_zero(model_with_main_grads(0.0), WEIGHTS, 0)
    with pytest.raises(AssertionError, match=r"0.weight.main_grad after wrap: got 12 nonzero of 12"):
        check_fp32_main_grads_are_zero(model_with_main_grads(1.0), WEIGHTS, 0)
