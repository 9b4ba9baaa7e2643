"""Any ``torch.nn.Module`` (on meta or not) read into one rank's ``ParamSpec`` list.

Three things make a module's params differ from its ``parameters()``:

* Ties: a tensor reachable under two names (an embedding tied to the output
  head) is one param, counted once under its first name, as ``parameters()``
  dedups it. A tied tensor owned by an ``nn.Embedding`` is flagged
  ``shared_embedding``, upstream's mark for the word embedding that the output
  layer shares (the distributed optimizer gives it a bucket of its own).
* Experts: a mixture-of-experts layer keeps its experts in a container (the
  rules are ``EXPERT_CONTAINER`` and ``EXPERT_COUNT_ATTRS``); with expert
  parallelism ``ep`` this rank holds ``experts / ep`` of them, flagged
  ``expert_parallel``. A container holds them either as a list of per-expert
  modules (this rank keeps the first ``experts / ep``) or fused into one
  tensor whose leading dimension is a multiple of the expert count (this rank
  holds ``1 / ep`` of that dimension). Routers and shared experts stay dense.
  A param already marked the upstream way (``allreduce = False``) is a local
  expert as it stands.
* Frozen params (``requires_grad=False``) have no gradient and no place in a buffer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from .planner import ParamSpec, is_expert_parallel

EXPERT_CONTAINER = {
    "class": re.compile(r"(Experts|ExpertGLU)$"),  # MixtralExperts, DbrxExpertGLU, JetMoeParallelExperts, ...
    "attribute": re.compile(r"^experts$"),  # mlp.experts, such as a user's nn.ModuleList
    "not": re.compile(r"[Ss]hared"),  # shared experts see every token: dense
}
"""A module with params is an expert container when its class or attribute name matches, and neither matches
``not``; the innermost counts (a ``MixtureOfExperts`` block holds its router beside its ``experts``)."""

EXPERT_COUNT_ATTRS = ("num_experts", "num_local_experts", "moe_num_experts", "n_routed_experts")
"""Where a container states its expert count; a module list or dict without one holds one expert per entry."""

PER_EXPERT_LISTS = (torch.nn.ModuleList, torch.nn.ModuleDict)


@dataclass(frozen=True)
class ModelReading:
    """One rank's trainable params, and what reading them found (for the summary)."""

    specs: tuple[ParamSpec, ...]
    ties: dict[str, tuple[str, ...]]
    """A tied param's kept name -> its other names."""
    frozen: int
    """Frozen tensors left out."""
    experts: tuple[int, ...]
    """Expert count of each expert container, in order (empty for a dense model)."""


def read_module(module: torch.nn.Module, dtype: torch.dtype | None = None, ep: int = 1) -> ModelReading:
    """``module``'s trainable params as this rank of ``ep`` expert-parallel ranks plans them.

    ``dtype``: the dtype every param is planned in (as a ``Float16Module`` casts them), or None for
    each param's own.
    """
    if not isinstance(ep, int) or isinstance(ep, bool) or ep < 1:
        raise ValueError(f"ep: got {ep!r}, but should be an integer >= 1")
    containers = _expert_containers(module)
    counts = tuple(count for _, count in containers.values())
    if ep != 1 and not counts:
        raise ValueError(f"ep: got {ep}, but should be 1 (the model has no experts)")
    for prefix, (_, count) in containers.items():
        if count % ep:
            raise ValueError(f"ep: got {ep}, but should be a divisor of the {count} experts of {prefix}")
    aliases: dict[int, tuple[torch.Tensor, list[str]]] = {}  # first seen first: parameters() order
    for name, param in module.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(param), (param, []))[1].append(name)
    specs, ties, frozen = [], {}, 0
    for param, names in aliases.values():
        name = names[0]
        if not param.requires_grad:
            frozen += 1
            continue
        if len(names) > 1:
            ties[name] = tuple(names[1:])
        spec = _expert_spec(name, param, containers, ep)
        if spec is None:
            continue  # an expert another expert-parallel rank holds
        tied_embedding = len(names) > 1 and any(isinstance(_owner(module, n), torch.nn.Embedding)
                                                for n in names)
        specs.append(ParamSpec(
            name, spec.shape, dtype or param.dtype,
            shared_embedding=tied_embedding or bool(getattr(param, "shared_embedding", False)),
            expert_parallel=spec.expert_parallel,
        ))
    return ModelReading(tuple(specs), ties, frozen, counts)


def _expert_containers(module: torch.nn.Module) -> dict[str, tuple[torch.nn.Module, int]]:
    """Prefix of each innermost expert container -> the container and its expert count."""
    candidates = {}
    for prefix, child in module.named_modules():
        attribute, cls = prefix.rpartition(".")[2], type(child).__name__
        named = EXPERT_CONTAINER["class"].search(cls) or EXPERT_CONTAINER["attribute"].search(attribute)
        shared = EXPERT_CONTAINER["not"].search(cls) or EXPERT_CONTAINER["not"].search(attribute)
        if prefix and named and not shared and any(True for _ in child.parameters()):
            candidates[prefix] = child
    found: dict[str, tuple[torch.nn.Module, int]] = {}
    for prefix, child in candidates.items():
        if any(other.startswith(f"{prefix}.") for other in candidates):
            continue
        stated = [getattr(child, a) for a in EXPERT_COUNT_ATTRS if isinstance(getattr(child, a, None), int)]
        count = stated[0] if stated else len(child) if isinstance(child, PER_EXPERT_LISTS) else None
        if not count:
            raise ValueError(
                f"experts: {prefix} ({type(child).__name__}) looks like an expert container, but states no "
                f"expert count: give it one of the attributes {', '.join(EXPERT_COUNT_ATTRS)}, or make it a "
                "ModuleList of one module per expert"
            )
        found[prefix] = child, count
    return found


def _expert_spec(name: str, param: torch.Tensor, containers: dict[str, tuple[torch.nn.Module, int]],
                 ep: int) -> ParamSpec | None:
    """The param's shape on this rank and whether it is an expert's; None if another rank holds it."""
    shape, parts = tuple(param.shape), name.split(".")
    depth = next((i for i in range(1, len(parts)) if ".".join(parts[:i]) in containers), None)
    if depth is None:
        return ParamSpec(name, shape, expert_parallel=is_expert_parallel(param))
    prefix = ".".join(parts[:depth])
    holder, count = containers[prefix]
    for part in parts[depth:-1]:
        if isinstance(holder, PER_EXPERT_LISTS) and len(holder) == count:
            return ParamSpec(name, shape, expert_parallel=True) if _position(holder, part) < count // ep else None
        holder = getattr(holder, part)
    if not shape or shape[0] % count:
        raise ValueError(
            f"experts: cannot tell how {name} of shape {shape} holds the {count} experts of {prefix}: "
            f"it is neither in a list of {count} per-expert modules nor fused with a leading dimension "
            f"divisible by {count}"
        )
    return ParamSpec(name, (shape[0] // ep, *shape[1:]), expert_parallel=True)


def _position(experts: torch.nn.Module, key: str) -> int:
    """Which expert ``key`` names: its index in a ModuleList, its place in a ModuleDict."""
    if isinstance(experts, torch.nn.ModuleList):
        return int(key)
    return list(experts.keys()).index(key)


def _owner(module: torch.nn.Module, name: str) -> torch.nn.Module:
    return module.get_submodule(name.rpartition(".")[0])
