"""FP8 and MXFP8 quantization of parameters, emulated in plain torch: the storage Transformer Engine keeps.

Two recipes, as Transformer Engine's parameters hold them:

- **per-tensor FP8** (``TENSOR``): one E4M3 payload per parameter and one
  scale, ``448 / amax`` of the whole parameter; a parameter sharded over
  ranks agrees its amax across them first, or each shard would be scaled
  on its own (``Fp8Tensor.quantize`` takes the amax as an argument for
  that reason).
- **MXFP8** (``MX``, OCP Microscaling Formats v1.0): blocks of 32
  consecutive elements, each with an E8M0 scale ``2^(floor(log2(amax)) - 8)``
  (8 is E4M3's largest exponent) and E4M3 elements ``v / scale``, saturated
  at 448; a 2-D weight keeps a row-wise copy (blocks along its rows) and a
  column-wise one (blocks along its columns), as a GEMM's forward and
  backward read them. A row shorter than a multiple of 32 ends in a shorter
  block (Transformer Engine requires multiples of 32; the suite's small
  models have none).

Payloads are ``uint8`` (the bytes of ``torch.float8_e4m3fn``): gloo has no
float8 type, and ``torch.equal`` is not implemented for float8 tensors, so
bytes are what is compared and communicated. A cast to ``float8_e8m0fnu``
rounds up (0.75 -> 1), so an MX scale is computed from the exponent
(``torch.frexp``), never cast. A block holding a NaN or an infinity gets the
NaN scale (E8M0 0xFF): E4M3 has no infinity, and its elements dequantize
to NaN. An all-zero block gets the smallest scale, 2^-127.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0
E4M3_EMAX = 8
"""The largest exponent of an E4M3 normal number (448 = 1.75 x 2^8)."""
BLOCK = 32
E8M0_BIAS = 127
E8M0_NAN = 255
TENSOR, MX = "fp8", "mxfp8"
RECIPES = (TENSOR, MX)
"""How a quantized parameter is held: per-tensor FP8, or MXFP8."""


KEPT_IN_HIGH_PRECISION = ("embed", "lm_head", "output_layer", "wte", "wpe")
"""Words in the names of 2-D weights that stay in their dtype: embeddings and output heads are no linear layer of
Transformer Engine's."""


def quantizable(name: str, shape: tuple[int, ...]) -> bool:
    """Whether a param is one Transformer Engine holds quantized under ``fp8_param_gather``: the 2-D weight of a
    linear layer (embeddings, output heads, norms, biases and fused 3-D expert tensors stay in their dtype)."""
    last = name.rsplit(".", 1)[-1]
    return len(shape) == 2 and last == "weight" and not any(word in name for word in KEPT_IN_HIGH_PRECISION)


def to_e4m3_bytes(values: torch.Tensor) -> torch.Tensor:
    """``values`` (any float dtype) rounded to E4M3, saturating at +-448, as bytes."""
    return values.float().clamp(-E4M3_MAX, E4M3_MAX).to(E4M3).view(torch.uint8)


def from_e4m3_bytes(payload: torch.Tensor) -> torch.Tensor:
    return payload.view(E4M3).float()


@dataclass
class Fp8Tensor:
    """A per-tensor FP8 parameter's storage: its E4M3 bytes and the inverse of its scale."""

    data: torch.Tensor
    """uint8, the parameter's shape."""
    scale_inv: torch.Tensor
    """float32 scalar: a value is its E4M3 number times this."""

    @staticmethod
    def scale_of(amax: float) -> torch.Tensor:
        """``448 / amax`` in float32, as Transformer Engine keeps it; 1 where the amax is 0 or not finite."""
        return torch.tensor(E4M3_MAX / amax if 0 < amax < math.inf else 1.0, dtype=torch.float32)

    @classmethod
    def quantize(cls, values: torch.Tensor, amax: float) -> "Fp8Tensor":
        """``values`` scaled by the scale of ``amax``, the amax of the whole parameter (not of ``values`` alone
        where they are a shard of it)."""
        scale = cls.scale_of(amax)
        return cls(to_e4m3_bytes(values.float() * scale), torch.reciprocal(scale))

    def dequantize(self) -> torch.Tensor:
        return from_e4m3_bytes(self.data) * self.scale_inv


@dataclass
class MxBlocks:
    """One MXFP8 copy: E4M3 bytes and one E8M0 scale byte per block of 32 along the last dimension."""

    data: torch.Tensor
    """uint8, shape ``(rows, length)``."""
    scales: torch.Tensor
    """uint8 E8M0 codes, shape ``(rows, ceil(length / 32))``."""

    @classmethod
    def quantize(cls, rows: torch.Tensor) -> "MxBlocks":
        rows = rows.float()
        length = rows.shape[-1]
        blocks = math.ceil(length / BLOCK) if length else 0
        padded = torch.nn.functional.pad(rows, (0, blocks * BLOCK - length)).reshape(rows.shape[0], blocks, BLOCK)
        amax = padded.abs().amax(dim=-1)
        bad = ~torch.isfinite(amax)
        _, exponent = torch.frexp(torch.where(bad | (amax == 0), torch.ones_like(amax), amax))
        shared = (exponent - 1 - E4M3_EMAX).clamp(-E8M0_BIAS, E8M0_BIAS)  # frexp: amax = m * 2^e, m in [0.5, 1)
        shared = torch.where(amax == 0, torch.full_like(shared, -E8M0_BIAS), shared)
        codes = torch.where(bad, torch.full_like(shared, E8M0_NAN), shared + E8M0_BIAS).to(torch.uint8)
        scaled = padded * torch.pow(2.0, -shared.float()).unsqueeze(-1)
        data = to_e4m3_bytes(scaled).reshape(rows.shape[0], blocks * BLOCK)[:, :length]
        nan = torch.full_like(data, 0x7F)  # E4M3's NaN
        data = torch.where(bad.repeat_interleave(BLOCK, dim=1)[:, :length], nan, data)
        return cls(data.contiguous(), codes)

    def dequantize(self) -> torch.Tensor:
        codes = self.scales.to(torch.int32)
        scale = torch.where(codes == E8M0_NAN, torch.full_like(codes, math.nan, dtype=torch.float32),
                            torch.pow(2.0, (codes - E8M0_BIAS).float()))
        length = self.data.shape[-1]
        return from_e4m3_bytes(self.data) * scale.repeat_interleave(BLOCK, dim=-1)[:, :length]


@dataclass
class Mxfp8Tensor:
    """An MXFP8 parameter's storage: a row-wise copy and, for a 2-D weight, a column-wise one."""

    shape: tuple[int, ...]
    rowwise: MxBlocks
    colwise: MxBlocks | None

    @classmethod
    def quantize(cls, values: torch.Tensor) -> "Mxfp8Tensor":
        rows = values.reshape(-1, values.shape[-1]) if values.dim() > 1 else values.reshape(1, -1)
        colwise = MxBlocks.quantize(rows.t()) if values.dim() == 2 else None
        return cls(tuple(values.shape), MxBlocks.quantize(rows), colwise)

    def dequantize(self, copy: str = "rowwise") -> torch.Tensor:
        """The values one copy holds, in the parameter's shape."""
        if copy == "colwise" and self.colwise is not None:
            return self.colwise.dequantize().t().reshape(self.shape)
        return self.rowwise.dequantize().reshape(self.shape)

    def storage_bytes(self) -> int:
        parts = [self.rowwise] + ([self.colwise] if self.colwise is not None else [])
        return sum(p.data.numel() + p.scales.numel() for p in parts)


def quantize(recipe: str, values: torch.Tensor, amax: float | None = None) -> Fp8Tensor | Mxfp8Tensor:
    """``values`` held as ``recipe`` says; a per-tensor FP8 parameter needs the amax of the whole parameter."""
    if recipe == TENSOR:
        return Fp8Tensor.quantize(values, float(values.abs().max()) if amax is None else amax)
    if recipe == MX:
        return Mxfp8Tensor.quantize(values)
    raise ValueError(f"recipe: got {recipe!r}, but should be one of {', '.join(RECIPES)}")


def equal_bytes(a: Fp8Tensor | Mxfp8Tensor, b: Fp8Tensor | Mxfp8Tensor) -> bool:
    """Whether two quantized storages hold the same bytes (payloads and scales)."""
    if isinstance(a, Fp8Tensor) and isinstance(b, Fp8Tensor):
        return torch.equal(a.data, b.data) and torch.equal(a.scale_inv, b.scale_inv)
    if isinstance(a, Mxfp8Tensor) and isinstance(b, Mxfp8Tensor):
        copies = [(a.rowwise, b.rowwise)] + ([(a.colwise, b.colwise)] if a.colwise is not None else [])
        return (a.shape == b.shape and (a.colwise is None) == (b.colwise is None)
                and all(torch.equal(x.data, y.data) and torch.equal(x.scales, y.scales) for x, y in copies))
    return False
