"""Tiny models and deterministic per-rank data for the multi-rank suite.

Every rank can regenerate any rank's batch from (seed, step, microbatch, rank),
which is what the single-process oracle trained on the global batch needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

BATCH, SEQ = 4, 6
IGNORE = -100


@dataclass(frozen=True)
class Shape:
    """The sizes of the suite's models: where a layout's offsets, padding, shard boundaries and MX blocks fall."""

    hidden: int
    ffn: int
    vocab: int
    blocks: int = 1
    """Residual MLP blocks (the mixture of experts has one expert layer whatever this says)."""
    quantized_head: bool = False
    """Whether the output head is held quantized too, beside the MLPs' weights."""

    def numels(self) -> dict[str, int]:
        """The elements of the dense model's params, untied (what the layout pads and shards)."""
        block = {"fc1.weight": self.ffn * self.hidden, "fc1.bias": self.ffn,
                 "fc2.weight": self.hidden * self.ffn, "fc2.bias": self.hidden}
        return {"embed.weight": self.vocab * self.hidden, **block,
                **{f"more.{i}.{n}": v for i in range(self.blocks - 1) for n, v in block.items()},
                "norm.weight": self.hidden, "norm.bias": self.hidden, "head.weight": self.vocab * self.hidden}


SHAPES: dict[str, Shape] = {
    "base": Shape(hidden=24, ffn=48, vocab=37),
    "odd": Shape(hidden=13, ffn=29, vocab=31),
    "deep": Shape(hidden=20, ffn=44, vocab=37, blocks=3, quantized_head=True),
}
"""``base``: both weights hold 1,152 elements, a multiple of 64, 32 and 128, so no padding falls between them and
their MX blocks end where the buffer's alignment does; ``odd``: prime and odd sizes (377-element weights, rows of 13
and 29, each shorter than one MX block), so every param start is padded and shard boundaries fall inside weights;
``deep``: three blocks of 880-element weights and a quantized output head, more buckets and several quantized
weights with padding between them in one bucket."""
BASE_SHAPE = SHAPES["base"]
VOCAB, HIDDEN, FFN = BASE_SHAPE.vocab, BASE_SHAPE.hidden, BASE_SHAPE.ffn


class Block(torch.nn.Module):
    """A residual MLP."""

    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(shape.hidden, shape.ffn)
        self.fc2 = torch.nn.Linear(shape.ffn, shape.hidden)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.fc2(torch.relu(self.fc1(h)))


class TinyLM(torch.nn.Module):
    """Embedding, residual MLP blocks (the first one's layers named ``fc1``, ``fc2``; the others under ``more``), a
    norm and an output head (optionally tied)."""

    def __init__(self, tied: bool = False, unused_layer: bool = False, shape: Shape = BASE_SHAPE) -> None:
        super().__init__()
        hidden = shape.hidden
        self.embed = torch.nn.Embedding(shape.vocab, hidden)
        self.fc1 = torch.nn.Linear(hidden, shape.ffn)
        self.fc2 = torch.nn.Linear(shape.ffn, hidden)
        self.more = torch.nn.ModuleList(Block(shape) for _ in range(shape.blocks - 1)) if shape.blocks > 1 else None
        self.norm = torch.nn.LayerNorm(hidden)
        self.head = None if tied else torch.nn.Linear(hidden, shape.vocab, bias=False)
        if tied:
            self.embed.weight.shared_embedding = True
        self.unused = torch.nn.Linear(hidden, hidden) if unused_layer else None
        self.skip_fc = False  # a test switches this on one rank to starve fc1/fc2 of grads

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        if not self.skip_fc:
            h = h + self.fc2(torch.relu(self.fc1(h)))
        for block in self.more or ():
            h = block(h)
        h = self.norm(h)
        if self.head is None:
            return h @ self.embed.weight.T
        return self.head(h)


LINEAR_WEIGHTS = ("fc1.weight", "fc2.weight")
"""The weights of TinyLM's linear layers: what a model holds quantized under fp8_param_gather (embeddings, the norm,
biases and, unless the shape says otherwise, the head stay in their dtype, as Transformer Engine's models hold
them)."""


def held_quantized(name: str, shape: Shape = BASE_SHAPE) -> bool:
    """Whether a model of this suite holds this param quantized under fp8_param_gather: a linear layer's weight
    (``experts.0.fc1.weight``, ``more.0.fc1.weight`` too), and the head's where the shape quantizes it."""
    return name.endswith(LINEAR_WEIGHTS) or shape.quantized_head and name == "head.weight"


def make_model(tied: bool = False, dtype: torch.dtype = torch.float32, seed: int = 1234,
               quantized: str | None = None, shape: Shape = BASE_SHAPE, keep_init: bool = False, **kw) -> TinyLM:
    """``quantized``: mark the linear weights to be held in that recipe (``param.fp8_recipe``); ``keep_init``: each
    of them keeps its value at initialization (``keep_high_precision_init``)."""
    torch.manual_seed(seed)
    model = TinyLM(tied=tied, shape=shape, **kw).to(dtype)
    mark_quantized(model.named_parameters(), quantized, shape, keep_init)
    return model


def mark_quantized(named, quantized: str | None, shape: Shape, keep_init: bool, prefix: str = "") -> None:
    """Mark the params the shape holds quantized with the recipe (``param.fp8_recipe``)."""
    if quantized is None:
        return
    for name, param in named:
        if held_quantized(prefix + name, shape):
            param.fp8_recipe = quantized
            if keep_init:
                keep_high_precision_init(param)


def keep_high_precision_init(param: torch.nn.Parameter) -> None:
    """Keep the param's value before quantization beside it, as Transformer Engine's
    ``preserve_high_precision_init_val`` does: an optimizer may seed its fp32 master from it
    (``param.high_precision_init_val``) instead of from the quantized values, then drop it."""
    param.high_precision_init_val = param.detach().clone()


def batch(seed: int, step: int, micro: int, rank: int, ragged: bool = False,
          vocab: int = VOCAB) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, labels) for one microbatch; ``ragged`` masks a rank-dependent number of labels."""
    gen = torch.Generator().manual_seed(hash((seed, step, micro, rank)) % 2**31)
    tokens = torch.randint(0, vocab, (BATCH, SEQ), generator=gen)
    labels = torch.randint(0, vocab, (BATCH, SEQ), generator=gen)
    if ragged:
        labels[:, : (rank + step + micro) % SEQ] = IGNORE
    return tokens, labels


def loss_fn(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    return torch.nn.functional.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE, reduction=reduction
    )


def tokens_in(labels: torch.Tensor) -> int:
    return int((labels != IGNORE).sum())
