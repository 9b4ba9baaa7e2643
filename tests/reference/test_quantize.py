"""The FP8 and MXFP8 quantizers against values worked by hand from the E4M3 encoding (bias 7, 3 mantissa bits, no
infinity, 448 its largest) and the OCP MX v1.0 rule (scale 2^(floor(log2 amax) - 8) per 32 elements, E8M0 bias 127):
saturation, zeros, subnormals, rounding to even, NaN and infinities."""

import math

import pytest
import torch

from reference.quantize import Fp8Tensor, MxBlocks, Mxfp8Tensor, equal_bytes, quantize, to_e4m3_bytes


def block(*values: float) -> torch.Tensor:
    """One row: ``values`` then zeros, 32 in all."""
    return torch.tensor([list(values) + [0.0] * (32 - len(values))])


@pytest.mark.parametrize("value, byte", [
    (1.0, 0x38),     # 2^0: exponent field 7, mantissa 0
    (-1.0, 0xB8),
    (448.0, 0x7E),   # 1.75 x 2^8, the largest
    (1e6, 0x7E),     # saturates
    (-1e6, 0xFE),
    (2 ** -9, 0x01),  # the smallest subnormal
    (2 ** -10, 0x00),  # half of it rounds to even: 0
    (3 * 2 ** -10, 0x02),  # 1.5 x 2^-9 rounds to even: 2^-8
    (0.0, 0x00),
])
def test_e4m3_bytes_are_the_encoding_worked_by_hand(value, byte):
    assert to_e4m3_bytes(torch.tensor([value])).item() == byte


@pytest.mark.parametrize("values, code, first", [
    ((1.0,), 127 - 8, 0x78),        # amax 1: scale 2^-8, 1 / 2^-8 = 256 = 2^8
    ((0.75, 0.5), 127 - 9, 0x7C),   # floor(log2 0.75) = -1: scale 2^-9, 384 = 1.5 x 2^8
    ((500.0,), 127, 0x7E),          # floor(log2 500) = 8: scale 1, 500 saturates to 448
    ((0.0,), 0, 0x00),              # all zero: the smallest scale, 2^-127
    ((2.0 ** 100,), 127 + 92, 0x78),  # 2^100: scale 2^92
    ((2.0 ** -140,), 0, 0x00),      # 2^-140: scale 2^-148 clamps to 2^-127; 2^-13 is below E4M3's subnormals
])
def test_an_mx_block_has_the_scale_and_elements_of_the_ocp_rule(values, code, first):
    got = MxBlocks.quantize(block(*values))
    assert got.scales.tolist() == [[code]] and got.data[0, 0].item() == first, (got.scales, got.data[0, :2])


def test_small_elements_of_an_mx_block_become_subnormals_or_round_to_even():
    got = MxBlocks.quantize(block(1.0, 2 ** -17, 2 ** -18, 3 * 2 ** -18))
    assert got.data[0, :4].tolist() == [0x78, 0x01, 0x00, 0x02], got.data[0, :4]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_block_holding_nan_or_an_infinity_gets_the_nan_scale(bad):
    got = MxBlocks.quantize(torch.cat([block(1.0, bad), block(1.0)], dim=1))
    assert got.scales.tolist() == [[255, 127 - 8]], got.scales
    back = got.dequantize()
    assert torch.isnan(back[0, :32]).all() and back[0, 32].item() == 1.0, back[0, 30:34]


def test_a_row_not_a_multiple_of_32_ends_in_a_shorter_block():
    row = torch.cat([torch.full((32,), 0.25), torch.full((8,), 4.0)]).unsqueeze(0)
    got = MxBlocks.quantize(row)
    assert got.scales.tolist() == [[127 - 10, 127 - 6]] and got.data.shape == (1, 40), (got.scales, got.data.shape)
    assert torch.equal(got.dequantize(), row)


def test_a_weight_has_a_rowwise_and_a_columnwise_copy_with_blocks_along_each():
    weight = torch.ones(3, 40)
    weight[0, 0] = 96.0  # raises the scale of row 0's first block, and of column 0's only block (96 = 384 x 2^-2)
    got = Mxfp8Tensor.quantize(weight)
    assert got.rowwise.scales.shape == (3, 2) and got.colwise.scales.shape == (40, 1), got
    assert got.rowwise.scales[0, 0].item() == 127 + 6 - 8 and got.rowwise.scales[1, 0].item() == 127 - 8
    assert got.colwise.scales[0, 0].item() == 127 + 6 - 8 and got.colwise.scales[1, 0].item() == 127 - 8
    assert torch.equal(got.dequantize("rowwise"), weight) and torch.equal(got.dequantize("colwise"), weight)
    assert got.storage_bytes() == 2 * 120 + 6 + 40


def test_per_tensor_fp8_scales_by_the_amax_of_the_whole_parameter():
    got = Fp8Tensor.quantize(torch.tensor([1.0, -2.0]), amax=2.0)  # scale 448 / 2 = 224
    assert got.data.tolist() == [0x76, 0xFE] and got.scale_inv.item() == pytest.approx(1 / 224)
    assert torch.equal(got.dequantize(), torch.tensor([1.0, -2.0]))
    zero = Fp8Tensor.quantize(torch.zeros(3), amax=0.0)
    assert zero.scale_inv.item() == 1.0 and zero.data.tolist() == [0, 0, 0]


def test_a_shard_quantized_with_the_whole_parameters_amax_is_a_slice_of_the_whole():
    torch.manual_seed(0)
    whole = torch.randn(64)
    whole[50] = 9.0  # the amax lives in the second shard
    full = quantize("fp8", whole)
    own = Fp8Tensor.quantize(whole[:32], amax=float(whole.abs().max()))
    local = Fp8Tensor.quantize(whole[:32], amax=float(whole[:32].abs().max()))
    assert torch.equal(own.data, full.data[:32]) and torch.equal(own.scale_inv, full.scale_inv)
    assert not torch.equal(local.data, full.data[:32]), "a shard's own amax gives other bytes"


def test_equal_bytes_tells_storages_apart_by_any_byte():
    a = quantize("mxfp8", torch.arange(64.0).reshape(2, 32))
    b = quantize("mxfp8", torch.arange(64.0).reshape(2, 32))
    assert equal_bytes(a, b)
    b.colwise.scales[3, 0] += 1
    assert not equal_bytes(a, b)
    with pytest.raises(ValueError, match="recipe: got 'fp4', but should be one of fp8, mxfp8"):
        quantize("fp4", torch.zeros(1))


@pytest.mark.parametrize("recipe", ["fp8", "mxfp8"])
def test_quantizing_makes_no_tensor_on_another_device(recipe):
    """Params live on the GPU there; a tensor made on the CPU mid-way fails there alone. The meta device refuses a
    CPU operand the way CUDA does, so a CPU machine sees it."""
    values = torch.empty(4, 40, device="meta")
    got = quantize(recipe, values, amax=1.0).dequantize().device
    assert got.type == "meta", f"got the dequantized values on {got}, but should be on meta, as the params"
