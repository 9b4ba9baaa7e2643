"""The suite's own quantizer: what FP8 and MXFP8 params must hold, element by element, from the formats' definitions.

Written apart from any implementation (the reference's uses torch's float8
casts; this one encodes bits with Python's ``math``), so that a check of an
implementation's quantized params is not the implementation checking itself.

- E4M3 (``float8_e4m3fn``): sign, 4 exponent bits of bias 7, 3 mantissa
  bits; no infinity; 0x7F and 0xFF are NaN; the largest value 448 (0x7E);
  subnormals down to 2^-9; rounding to nearest, ties to even; values beyond
  448 saturate to it.
- Per-tensor FP8: every element times ``448 / amax`` of the whole param
  (1 where the amax is 0), encoded; the inverse of the scale is kept.
- MXFP8 (OCP Microscaling Formats v1.0): blocks of 32 consecutive elements
  along a row; the block's scale is 2^(floor(log2 amax) - 8), kept as its
  E8M0 code (exponent + 127, clamped to 0..254; 255 where the block holds a
  NaN or an infinity; 0 for an all-zero block); each element is v / scale
  encoded. A 2-D weight has a row-wise copy and a column-wise one (the rows
  of its transpose).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

E4M3_MAX = 448.0
E4M3_NAN = 0x7F


def _round_half_even(x: float) -> int:
    floor = math.floor(x)
    rest = x - floor
    if rest > 0.5 or (rest == 0.5 and floor % 2):
        return floor + 1
    return floor


def e4m3(value: float) -> int:
    """The E4M3 byte of ``value``, saturating at 448."""
    if math.isnan(value):
        return E4M3_NAN
    sign = 0x80 if math.copysign(1.0, value) < 0 else 0
    magnitude = min(abs(value), E4M3_MAX)
    if magnitude < 2.0 ** -6:  # subnormal: mantissa in units of 2^-9
        return sign | _round_half_even(magnitude / 2.0 ** -9)  # 8 units is 2^-6, the smallest normal: code 0x08
    exponent = math.floor(math.log2(magnitude))
    mantissa = _round_half_even((magnitude / 2.0 ** exponent - 1.0) * 8)
    if mantissa == 8:
        exponent, mantissa = exponent + 1, 0
    code = (exponent + 7) << 3 | mantissa
    return sign | min(code, 0x7E)


def e4m3_value(code: int) -> float:
    """The number an E4M3 byte encodes."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = code >> 3 & 0xF, code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0:
        return sign * mantissa * 2.0 ** -9
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)


def per_tensor(values: Sequence[float], amax: float) -> tuple[list[int], float]:
    """A per-tensor FP8 param's bytes and the inverse of its scale, ``amax`` the whole param's."""
    scale = E4M3_MAX / amax if 0 < amax < math.inf else 1.0
    scale = _f32(scale)
    return [e4m3(_f32(v * scale)) for v in values], _f32(1.0 / scale)


def _f32(x: float) -> float:
    """``x`` rounded to float32, as the implementations compute the scale and the scaled values."""
    return struct.unpack("f", struct.pack("f", x))[0] if math.isfinite(x) else x


def mx_rows(rows: Sequence[Sequence[float]]) -> tuple[list[list[int]], list[list[int]]]:
    """The MXFP8 bytes and E8M0 scale codes of each row, in blocks of 32 (the last may be shorter)."""
    data, scales = [], []
    for row in rows:
        row_bytes, row_scales = [], []
        for start in range(0, len(row), 32):
            block = row[start:start + 32]
            if any(not math.isfinite(v) for v in block):
                row_scales.append(255)
                row_bytes += [E4M3_NAN] * len(block)
                continue
            amax = max(abs(v) for v in block)
            shared = -127 if amax == 0 else max(-127, min(127, math.floor(math.log2(amax)) - 8))
            row_scales.append(shared + 127)
            row_bytes += [e4m3(v / 2.0 ** shared) for v in block]
        data.append(row_bytes)
        scales.append(row_scales)
    return data, scales


def per_tensor_values(values: Sequence[float], amax: float) -> list[float]:
    """What a per-tensor FP8 param computes with: each byte's number times the inverse scale, in float32."""
    data, scale_inv = per_tensor(values, amax)
    return [_f32(e4m3_value(code) * scale_inv) for code in data]


def mx_values(rows: Sequence[Sequence[float]]) -> list[list[float]]:
    """What an MXFP8 param computes with: its row-wise copy, each byte's number times its block's scale."""
    data, scales = mx_rows(rows)
    return [[e4m3_value(code) * (math.nan if scale[i // 32] == 255 else 2.0 ** (scale[i // 32] - 127))
             for i, code in enumerate(row)] for row, scale in zip(data, scales)]


def mx(values: Sequence[Sequence[float]] | Sequence[float]) -> dict[str, tuple[list[list[int]], list[list[int]]]]:
    """An MXFP8 param: ``rowwise`` (bytes, scales), and ``colwise`` for a 2-D one."""
    two_d = bool(values) and isinstance(values[0], (list, tuple))
    rows = [list(r) for r in values] if two_d else [list(values)]
    out = {"rowwise": mx_rows(rows)}
    if two_d:
        out["colwise"] = mx_rows([list(col) for col in zip(*rows)])
    return out
