"""Tiny models and deterministic per-rank data for the multi-rank suite.

Every rank can regenerate any rank's batch from (seed, step, microbatch, rank),
which is what the single-process oracle trained on the global batch needs.
"""

from __future__ import annotations

import torch

VOCAB, HIDDEN, FFN, BATCH, SEQ = 37, 24, 48, 4, 6
IGNORE = -100


class TinyLM(torch.nn.Module):
    """Embedding, one residual MLP block, a norm and an output head (optionally tied)."""

    def __init__(self, tied: bool = False, unused_layer: bool = False) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.fc1 = torch.nn.Linear(HIDDEN, FFN)
        self.fc2 = torch.nn.Linear(FFN, HIDDEN)
        self.norm = torch.nn.LayerNorm(HIDDEN)
        self.head = None if tied else torch.nn.Linear(HIDDEN, VOCAB, bias=False)
        if tied:
            self.embed.weight.shared_embedding = True
        self.unused = torch.nn.Linear(HIDDEN, HIDDEN) if unused_layer else None
        self.skip_fc = False  # a test switches this on one rank to starve fc1/fc2 of grads

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        if not self.skip_fc:
            h = h + self.fc2(torch.relu(self.fc1(h)))
        h = self.norm(h)
        if self.head is None:
            return h @ self.embed.weight.T
        return self.head(h)


LINEAR_WEIGHTS = ("fc1.weight", "fc2.weight")
"""The weights of TinyLM's linear layers: what a model holds quantized under fp8_param_gather (embeddings, the norm,
the head and biases stay in their dtype, as Transformer Engine's models hold them)."""


def held_quantized(name: str) -> bool:
    """Whether a model of this suite holds this param quantized under fp8_param_gather: a linear layer's weight
    (``experts.0.fc1.weight`` too)."""
    return name.endswith(LINEAR_WEIGHTS)


def make_model(tied: bool = False, dtype: torch.dtype = torch.float32, seed: int = 1234,
               quantized: str | None = None, **kw) -> TinyLM:
    """``quantized``: mark the linear weights to be held in that recipe (``param.fp8_recipe``)."""
    torch.manual_seed(seed)
    model = TinyLM(tied=tied, **kw).to(dtype)
    for name, param in model.named_parameters():
        if quantized is not None and held_quantized(name):
            param.fp8_recipe = quantized
    return model


def batch(seed: int, step: int, micro: int, rank: int, ragged: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, labels) for one microbatch; ``ragged`` masks a rank-dependent number of labels."""
    gen = torch.Generator().manual_seed(hash((seed, step, micro, rank)) % 2**31)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    if ragged:
        labels[:, : (rank + step + micro) % SEQ] = IGNORE
    return tokens, labels


def loss_fn(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    return torch.nn.functional.cross_entropy(
        logits.float().reshape(-1, VOCAB), labels.reshape(-1), ignore_index=IGNORE, reduction=reduction
    )


def tokens_in(labels: torch.Tensor) -> int:
    return int((labels != IGNORE).sum())
