"""Each parameter's backward time, for the simulated backward: measured here, at a measured rate, or given.

A model planned on the meta device computes nothing, so its backward is
profiled from real work of the same shapes, in one of three ways (``METHODS``):

- "measured layer shapes": the backward (grad input, grad weight, grad
  bias) of each distinct linear layer shape of the model is timed once on
  this device at the given tokens per rank, as repeated samples (a
  ``Figure``: median and 95% interval); each param of such a layer gets the
  median's FLOP share. Params of no linear layer (norms, embedding lookups)
  get their FLOPs at the timed layers' own rate: their FLOPs over their
  medians, summed over the model's layers;
- "FLOP count": one square linear backward of a known size is timed per
  dtype; its FLOPs over its median is the rate, and each param gets its
  FLOPs over the rate;
- "given total": a total the user gives (``--compute-ms``), spread over the
  params by FLOP share.

A param's backward FLOPs (``FLOPS_PER_TOKEN``, times the tokens per rank):

- a weight of 2 or more dims, (out, *in), not an embedding: 4 * numel
  (grad input 2 * in * out, grad weight 2 * in * out);
- a param of 0 or 1 dims (a bias, a norm's weight or bias): 2 * numel (a
  multiply-add per token and element, to reduce its grad over the tokens);
- an embedding table (2 dims, "embedding" in its name), (rows, width):
  1 * width (each token's row is added to); it is small beside the matmuls
  whatever its numel. A shared embedding (``shared_embedding``) is also the
  output layer: its output projection, 4 * numel, runs first in backward and
  readies no grad of its own (a step named None), while the embedding's
  grad is ready last.

Norm and lookup work is memory-bound, which a matmul rate underestimates; it
is a small share of a transformer's backward. Every linear is taken to see
every token: an MoE expert, which sees only its routed tokens, is overestimated.

Steps come in backward order: the reverse of ``parameters()`` (the order of
the specs given), the tied output projection first.

Bounded in time and memory: a sample should take about the device's
``Budget.seconds`` and hold at most its bytes. ``calibrate`` times square
probes of growing width to learn how many FLOPs that is, per dtype (16-bit
matmuls on a CPU can run 100x slower than fp32). A shape past the budget is
timed smaller, its tokens halved first (down to ``MIN_TOKENS``), then its
output width, and its samples are scaled back up by FLOPs; a note in the
profile says so. Small matmuls run less efficiently, so a scaled-down
shape's time leans high.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import torch

from reference.layout import ParamSpec

from ..stats import MIN_INTERVAL_SAMPLES, Figure

METHODS = ("measured layer shapes", "FLOP count", "given total")
FLOPS_PER_TOKEN = {"linear weight": 4, "elementwise": 2, "embedding lookup": 1}
"""Backward FLOPs per token: per element of a linear weight or an elementwise param; per width of a lookup."""
EMBEDDING_MARKER = "embedding"
MIN_TOKENS = 128
DEFAULT_SAMPLES = MIN_INTERVAL_SAMPLES + 1
PROBE_WIDTHS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PROBE_SAMPLES = 3


@dataclass(frozen=True)
class Budget:
    """What one timed sample may cost on this device: about ``seconds``, and ``bytes`` of tensors at most."""

    seconds: float
    bytes: float

    def __post_init__(self) -> None:
        for name in ("seconds", "bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
                raise ValueError(f"budget {name}: got {value!r}, but should be a positive number")


def default_budget(device: str) -> Budget:
    """50 ms and 1 GiB a sample on a CPU (shared, slow); 10 ms and half the free memory on a GPU."""
    if device.startswith("cuda"):
        return Budget(seconds=0.01, bytes=torch.cuda.mem_get_info(torch.device(device))[0] / 2)
    return Budget(seconds=0.05, bytes=2.0**30)


@dataclass(frozen=True)
class LinearShape:
    """A linear layer's backward as timed: y = x @ w.T + b, x (tokens, inp), w (out, inp)."""

    out: int
    inp: int
    tokens: int
    dtype: torch.dtype
    bias: bool

    @property
    def flops(self) -> float:
        weight = FLOPS_PER_TOKEN["linear weight"] * self.tokens * self.out * self.inp
        return weight + (FLOPS_PER_TOKEN["elementwise"] * self.tokens * self.out if self.bias else 0)

    @property
    def bytes(self) -> float:
        """Input, weight, output and bias, each with its grad."""
        elements = self.tokens * self.inp + self.out * self.inp + self.tokens * self.out
        return 2 * (elements + self.out * self.bias) * self.dtype.itemsize

    def fits(self, flops: float, max_bytes: float) -> bool:
        return self.flops <= flops and self.bytes <= max_bytes

    @property
    def label(self) -> str:
        bias = " + bias" if self.bias else ""
        return f"linear {self.out}x{self.inp}{bias}, {_dtype_name(self.dtype)}, {self.tokens} tokens"


Timer = Callable[[LinearShape, int], Sequence[float]]
"""(shape, samples) -> seconds of each sample of the shape's backward; injected by tests."""


@dataclass(frozen=True)
class BackwardStep:
    """One step of the backward: the param whose grad it readies (None: none), its seconds and FLOPs."""

    name: str | None
    seconds: float
    flops: float


@dataclass(frozen=True)
class ComputeProfile:
    """Per-param backward times in backward order, and how they were obtained."""

    method: str
    """One of ``METHODS``, with its figures: 'FLOP count at a measured rate of 171.9 GFLOP/s (float32)'."""
    tokens: int
    device: str
    steps: tuple[BackwardStep, ...]
    measurements: Mapping[str, Figure] = field(default_factory=dict)
    """What was timed, by shape label: seconds, at full size (scaled-down samples scaled back up)."""
    notes: tuple[str, ...] = ()

    @property
    def total_s(self) -> float:
        return sum(step.seconds for step in self.steps)

    def backward(self) -> list[tuple[str | None, float]]:
        """(param name or None, seconds) in backward order: what ``benchmarks.tuner.schedule.simulate`` takes."""
        return [(step.name, step.seconds) for step in self.steps]


@dataclass(frozen=True)
class _Work:
    name: str | None
    flops: float
    dtype: torch.dtype
    layer: LinearShape | None  # the timed linear whose backward covers this step, if any


def has_linear_layer(specs: Sequence[ParamSpec]) -> bool:
    """Whether ``profile_measured_layers`` has a layer shape to time (a weight of 2+ dims, not an embedding)."""
    return any(w.layer is not None for w in _works(specs, MIN_TOKENS))


def profile_measured_layers(specs: Sequence[ParamSpec], tokens: int, *, device: str | None = None,
                            samples: int = DEFAULT_SAMPLES, budget: Budget | None = None,
                            timer: Timer | None = None) -> ComputeProfile:
    """Time each distinct linear layer shape once; its params share its median by FLOPs (module docstring)."""
    works = _works(specs, tokens)
    device, budget, timer = _setup(device, budget, timer, samples)
    layers = list(dict.fromkeys(w.layer for w in works if w.layer is not None))
    if not layers:
        raise ValueError("specs: got no linear layer (a weight of 2+ dims, not an embedding) to time, but "
                         "measured layer shapes needs one; use profile_flop_rate or profile_given_total")
    calibrations = {dtype: calibrate(dtype, budget, timer) for dtype in {layer.dtype for layer in layers}}
    measurements, notes = {}, []
    for layer in layers:
        measurements[layer.label], note = _timed(layer, calibrations[layer.dtype], budget, timer, samples)
        notes += [note] if note else []
    layer_s = {layer: measurements[layer.label].median for layer in layers}
    timed = [w for w in works if w.layer is not None]
    rate = sum(w.flops for w in timed) / sum(layer_s[w.layer] * w.flops / w.layer.flops for w in timed)
    if any(w.layer is None for w in works):
        notes.append(f"params of no linear layer (norms, lookups) at the timed layers' rate, "
                     f"{rate / 1e9:.4g} GFLOP/s")
    steps = tuple(BackwardStep(w.name, layer_s[w.layer] * w.flops / w.layer.flops if w.layer else w.flops / rate,
                       w.flops) for w in works)
    return ComputeProfile(METHODS[0], tokens, device, steps, measurements, tuple(notes))


def profile_flop_rate(specs: Sequence[ParamSpec], tokens: int, *, device: str | None = None,
                      samples: int = DEFAULT_SAMPLES, budget: Budget | None = None,
                      timer: Timer | None = None) -> ComputeProfile:
    """Every param's FLOPs at the rate of one square linear backward timed here, one per dtype."""
    works = _works(specs, tokens)
    device, budget, timer = _setup(device, budget, timer, samples)
    rates, measurements = {}, {}
    for dtype in dict.fromkeys(w.dtype for w in works):
        shape = calibrate(dtype, budget, timer).shape
        figure = Figure.of(timer(shape, samples), unit="s", better="lower")
        measurements[shape.label] = figure
        rates[dtype] = shape.flops / figure.median
    steps = tuple(BackwardStep(w.name, w.flops / rates[w.dtype], w.flops) for w in works)
    rate_text = ", ".join(f"{r / 1e9:.4g} GFLOP/s ({_dtype_name(d)})" for d, r in rates.items())
    method = f"{METHODS[1]} at a measured rate of {rate_text}"
    return ComputeProfile(method, tokens, device, steps, measurements)


def profile_given_total(specs: Sequence[ParamSpec], total_s: float) -> ComputeProfile:
    """A user's total backward time, spread by FLOP share (tokens cancel out of the shares)."""
    if isinstance(total_s, bool) or not isinstance(total_s, numbers.Real) or not 0 < total_s < math.inf:
        raise ValueError(f"total_s: got {total_s!r}, but should be a positive finite number of seconds")
    works = _works(specs, tokens=1)
    flops = sum(w.flops for w in works)
    steps = tuple(BackwardStep(w.name, total_s * w.flops / flops, w.flops) for w in works)
    return ComputeProfile(f"{METHODS[2]} of {total_s * 1e3:.4g} ms, spread by FLOPs", 1, "none", steps)


@dataclass(frozen=True)
class Calibration:
    """A dtype's rate here, from the square linear backward that took an eighth of the budget or more."""

    shape: LinearShape
    rate: float
    """FLOP/s of the probe's fastest sample: a busy machine only slows samples down (``timeit``'s reason)."""

    def flops(self, budget: Budget) -> float:
        """The FLOPs a sample may hold to take about the budget's seconds."""
        return self.rate * budget.seconds


def calibrate(dtype: torch.dtype, budget: Budget, timer: Timer) -> Calibration:
    """Square probes of doubling width (8x the FLOPs each) until one takes an eighth of the budget's seconds.

    The widest is the last that fits the budget's bytes; it stands when none
    reaches the budget (a fast device).
    """
    for width in PROBE_WIDTHS:
        candidate = LinearShape(width, width, width, dtype, False)
        if width > PROBE_WIDTHS[0] and candidate.bytes > budget.bytes:
            break
        shape, seconds = candidate, min(timer(candidate, PROBE_SAMPLES))
        if seconds >= budget.seconds / 8:
            break
    return Calibration(shape, shape.flops / seconds)


def scaled_to_fit(shape: LinearShape, flops: float, max_bytes: float) -> LinearShape:
    """The shape, made small enough: tokens halved first (not below ``MIN_TOKENS``), then its outputs."""
    while not shape.fits(flops, max_bytes) and shape.tokens // 2 >= MIN_TOKENS:
        shape = replace(shape, tokens=shape.tokens // 2)
    while not shape.fits(flops, max_bytes) and shape.out > 1:
        shape = replace(shape, out=shape.out // 2)
    return shape


def time_linear_backward(shape: LinearShape, samples: int, device: str = "cpu") -> list[float]:
    """Seconds of each of ``samples`` backwards (grad input, weight, bias) of ``shape``, after one warm-up."""
    generator = torch.Generator(device="cpu").manual_seed(0)

    def tensor(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=generator).to(device=device, dtype=shape.dtype).requires_grad_()

    x, w = tensor(shape.tokens, shape.inp), tensor(shape.out, shape.inp)
    b = tensor(shape.out) if shape.bias else None
    y = torch.nn.functional.linear(x, w, b)
    grad = torch.randn(y.shape, generator=generator).to(device=device, dtype=shape.dtype)
    inputs = (x, w) if b is None else (x, w, b)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)

    def once() -> float:
        sync()
        start = time.perf_counter()
        torch.autograd.grad(y, inputs, grad, retain_graph=True)
        sync()
        return time.perf_counter() - start

    once()
    return [once() for _ in range(samples)]


def _timed(layer: LinearShape, calibration: Calibration, budget: Budget, timer: Timer,
           samples: int) -> tuple[Figure, str | None]:
    """The layer's backward seconds at full size, and a note when it was timed smaller."""
    flops = calibration.flops(budget)
    small = scaled_to_fit(layer, flops, budget.bytes)
    factor = layer.flops / small.flops
    figure = Figure.of((s * factor for s in timer(small, samples)), unit="s", better="lower")
    if small == layer:
        return figure, None
    return figure, (f"{layer.label}: timed at {small.tokens} tokens x {small.out} outputs to fit about "
                    f"{budget.seconds:g} s a sample ({flops:.3g} FLOPs at {calibration.rate / 1e9:.4g} "
                    f"GFLOP/s) and {budget.bytes:.3g} bytes, scaled up by FLOPs x{factor:.4g}")


def _setup(device: str | None, budget: Budget | None, timer: Timer | None, samples: int):
    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise ValueError(f"samples: got {samples!r}, but should be an integer >= 1 "
                         f"({MIN_INTERVAL_SAMPLES} or more for a 95% interval)")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    budget = budget or default_budget(device)
    if timer is None:
        def timer(shape: LinearShape, n: int) -> list[float]:
            return time_linear_backward(shape, n, device)
    return device, budget, timer


def _works(specs: Sequence[ParamSpec], tokens: int) -> list[_Work]:
    """Each step's FLOPs and timed layer, in backward order (module docstring)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise ValueError(f"tokens: got {tokens!r}, but should be a positive integer (tokens per rank)")
    specs = list(specs)
    if not specs:
        raise ValueError("specs: got none, but a profile needs at least one parameter")
    frozen = [s.name for s in specs if not s.requires_grad]
    if frozen:
        raise ValueError(f"specs: got frozen parameter {frozen[0]!r}, but should hold only trainable ones")
    by_name = {s.name: s for s in specs}
    layer_of: dict[str, LinearShape] = {}
    for spec in specs:
        if len(spec.shape) >= 2 and not _is_embedding(spec):
            prefix = spec.name.rpartition(".")[0]
            bias = by_name.get(f"{prefix}.bias" if prefix else "bias")
            has_bias = bias is not None and bias.shape == spec.shape[:1]
            layer = LinearShape(spec.shape[0], math.prod(spec.shape[1:]), tokens, spec.dtype, has_bias)
            layer_of[spec.name] = layer
            if has_bias:
                layer_of[bias.name] = layer
    works = [_Work(s.name, _flops(s, tokens), s.dtype, layer_of.get(s.name)) for s in reversed(specs)]
    tied = [s for s in specs if s.shared_embedding and _is_embedding(s)]
    projections = [_Work(None, FLOPS_PER_TOKEN["linear weight"] * tokens * s.numel, s.dtype,
                         LinearShape(s.shape[0], s.shape[1], tokens, s.dtype, False)) for s in tied]
    return projections + works


def _flops(spec: ParamSpec, tokens: int) -> float:
    if _is_embedding(spec):
        return FLOPS_PER_TOKEN["embedding lookup"] * tokens * spec.shape[1]
    kind = "linear weight" if len(spec.shape) >= 2 else "elementwise"
    return FLOPS_PER_TOKEN[kind] * tokens * spec.numel


def _is_embedding(spec: ParamSpec) -> bool:
    return len(spec.shape) == 2 and EMBEDDING_MARKER in spec.name


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
