"""The ddp-level handle adapters share: the implementation's own wrapper under the suites' names.

``ForwardingDDP`` forwards calls to the wrapped implementation (``raw``).
``GradsInParamsDDP`` is for wrappers that leave reduced grads in the params
(``param.grad`` or ``param.main_grad``) rather than in one flat buffer: it
gives each planned record a ``grad_data`` that concatenates those grads in
layout order, which is what the suites read.
"""

from __future__ import annotations

from typing import Sequence

import torch

from reference.layout import LayoutRecord

from .protocol import FinishesGradSync, HasNoSync, ZeroesGradBuffer


class ForwardingDDP:
    """``raw``'s forward, ``no_sync``, ``finish_grad_sync`` and ``zero_grad_buffer``, as the suites call them.

    ``declared_layouts``: the layout the implementation claims (its buffers'), which the suites check against
    what it is seen to do; ``unreadable``: why its reduced grads cannot be read, or None.
    """

    unreadable: str | None = None

    def __init__(self, raw, module: torch.nn.Module, buffers: Sequence) -> None:
        self.raw = raw
        self.module = module
        self.buffers = list(buffers)
        self.declared_layouts = [b.layout for b in self.buffers]

    def __call__(self, *args, **kwargs):
        return self.raw(*args, **kwargs)

    @property
    def cannot_accumulate(self) -> str | None:
        """``protocol.MayNotAccumulate``: a wrapper without ``no_sync`` reduces every microbatch."""
        if isinstance(self.raw, HasNoSync):
            return None
        return (f"{type(self.raw).__name__} has no no_sync(): accumulating grads over microbatches needs a "
                "no_sync() context manager")

    def no_sync(self):
        if self.cannot_accumulate:
            raise NotImplementedError(self.cannot_accumulate)
        return self.raw.no_sync()

    def finish_grad_sync(self, **options) -> None:
        self.raw.finish_grad_sync(**options)

    def zero_grad_buffer(self) -> None:
        self.raw.zero_grad_buffer()


class GradsBuffer:
    """A planned layout over grads that live in the params.

    ``grad_data`` is built on first use after each sync (the suites read it,
    the benchmarks do not, so timing never pays for the copy): the reduced
    grads concatenated in layout order, so ``grad_data[start:end]`` is a
    param's grad.
    """

    param_data = None  # the params are never re-pointed into a buffer

    def __init__(self, layout: LayoutRecord, owner: "GradsInParamsDDP") -> None:
        self.layout = layout
        self.params = {n: owner.named[n] for n in layout.param_index_map}
        self._owner = owner
        self._flat: torch.Tensor | None = None

    @property
    def grad_data(self) -> torch.Tensor:
        if self._flat is None:
            order = sorted(self.layout.param_index_map, key=lambda n: self.layout.param_index_map[n][0])
            grads = self._owner.reduced_grads([(n, self.params[n]) for n in order])
            self._flat = torch.cat([g.reshape(-1) for g in grads])
        return self._flat

    def forget(self) -> None:
        self._flat = None


class GradsInParamsDDP(ForwardingDDP):
    """A wrapper whose reduced grads stay in the params, in ``param.<source>``.

    With ``source="grad"`` (torch-DDP-like) ``main_grad`` is made an alias of
    ``param.grad`` as soon as autograd accumulates it, so a check can read
    ``main_grad`` inside ``no_sync`` too, and zeroing drops both. With
    ``source="main_grad"`` the wrapper owns ``main_grad`` and zeroes it itself
    (``raw.zero_grad_buffer``), or it is zeroed in place here.
    """

    def __init__(self, raw, module: torch.nn.Module, records: Sequence[LayoutRecord],
                 source: str = "grad") -> None:
        if source not in ("grad", "main_grad"):
            raise ValueError(f"source: got {source!r}, but should be 'grad' or 'main_grad'")
        self.named = dict(module.named_parameters())
        self.source = source
        super().__init__(raw, module, [GradsBuffer(r, self) for r in records])
        self.declared_layouts = None  # records of where grads are read from; a wrapper that claims them sets them
        if source == "grad":
            for param in self.named.values():
                if param.requires_grad:
                    param.register_post_accumulate_grad_hook(_alias_main_grad)

    def reduced_grad(self, param: torch.nn.Parameter) -> torch.Tensor:
        """This rank's reduced gradient of ``param``, full (not sharded)."""
        return getattr(param, self.source)

    def reduced_grads(self, named: list[tuple[str, torch.nn.Parameter]]) -> list[torch.Tensor]:
        """The reduced gradients of ``named`` (in layout order, the same on every rank): one read each."""
        return [self.reduced_grad(param) for _, param in named]

    def wait_for_reductions(self) -> None:
        """Call the wrapper's ``finish_grad_sync`` if it has one (torch DDP reduces within backward)."""
        if isinstance(self.raw, FinishesGradSync):
            self.raw.finish_grad_sync()

    def finish_grad_sync(self) -> None:
        """Wait for the wrapper and check that every trainable param got a reduced grad."""
        self.wait_for_reductions()
        missing = sorted(n for n, p in self.named.items() if p.requires_grad and getattr(p, self.source, None) is None)
        if missing:
            raise RuntimeError(
                f"finish_grad_sync: params {missing} got no reduced gradient, but every trainable "
                f"param should get one in param.{self.source}"
            )
        if self.source == "grad":  # a wrapper may have swapped param.grad for a view into its bucket
            for param in self.named.values():
                if param.requires_grad:
                    _alias_main_grad(param)
        for buf in self.buffers:
            buf.forget()

    def zero_grad_buffer(self) -> None:
        zeroes_itself = isinstance(self.raw, ZeroesGradBuffer)
        if zeroes_itself:
            self.raw.zero_grad_buffer()
        for param in self.named.values():
            param.grad = None
            if self.source == "grad" and hasattr(param, "main_grad"):
                del param.main_grad
            elif not zeroes_itself and getattr(param, "main_grad", None) is not None:
                param.main_grad.zero_()
        for buf in self.buffers:
            buf.forget()


def _alias_main_grad(param: torch.nn.Parameter) -> None:
    """The suites read ``main_grad``; a torch-DDP-like wrapper writes reduced grads into ``param.grad``."""
    param.main_grad = param.grad
