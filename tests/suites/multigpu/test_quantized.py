"""The suite's quantizer and the reference's, written apart, agree byte for byte on random values and on the edge
cases (saturation, subnormals, ties, zeros, NaN): the suite's checks of quantized params rest on the first."""

import math

import pytest
import torch

from reference.quantize import Fp8Tensor, Mxfp8Tensor
from suites.multigpu import quantized


def values(seed: int, shape) -> torch.Tensor:
    torch.manual_seed(seed)
    x = torch.randn(shape) * torch.exp2(torch.randint(-12, 12, shape).float())
    x.view(-1)[:6] = torch.tensor([0.0, 448.0, 1e6, 2 ** -17, 3 * 2 ** -18, -2 ** -18])
    return x


@pytest.mark.parametrize("seed", range(3))
def test_per_tensor_fp8_agrees(seed):
    x = values(seed, (300,))
    amax = float(x.abs().max())
    ours = Fp8Tensor.quantize(x, amax)
    data, scale_inv = quantized.per_tensor(x.tolist(), amax)
    assert ours.data.tolist() == data and ours.scale_inv.item() == scale_inv


@pytest.mark.parametrize("shape", [(7, 40), (64, 32), (3, 5)])
def test_mxfp8_agrees_rowwise_and_columnwise(shape):
    x = values(sum(shape), shape)
    x[1, 2] = math.nan
    ours = Mxfp8Tensor.quantize(x)
    want = quantized.mx(x.tolist())
    assert ours.rowwise.data.tolist() == want["rowwise"][0] and ours.rowwise.scales.tolist() == want["rowwise"][1]
    assert ours.colwise.data.tolist() == want["colwise"][0] and ours.colwise.scales.tolist() == want["colwise"][1]


def test_e4m3_edges_by_hand():
    assert [quantized.e4m3(v) for v in (1.0, 448.0, 480.0, 1e9, 2 ** -9, 2 ** -10, 3 * 2 ** -10, -0.0, math.nan)] == [
        0x38, 0x7E, 0x7E, 0x7E, 0x01, 0x00, 0x02, 0x80, 0x7F]
