"""Making process groups that work whether or not the default group is bound to a device.

A default group initialised with ``device_id`` (what torch recommends on
NCCL) is *bound*, and from then on ``torch.distributed.new_group`` takes
another path (torch 2.3 through 2.15): it splits the new group's
communicator off the default one, a split every rank of the default group
must join, and connects it eagerly. Three kinds of group break on that path:

- a group made by its members only (``use_local_synchronization=True``):
  the ranks outside it never join the split, so on NCCL its members wait
  forever;
- a group that leaves some ranks out, of another backend than the default
  (a gloo control group over part of a NCCL job): the ranks outside are asked
  to split the default group's backend, which on NCCL they do alone and on
  gloo cannot (``perform_nocolor_split`` does not exist there);
- a group whose backend is a Python ``ProcessGroup`` (the recording group):
  torch asks it for its backend on the bound device before anything could be
  registered on it ("No backend type associated with device type cuda").

Every group this project makes goes through ``new_group`` below, which lifts
the binding for the duration of the call and restores it: the new group then
connects lazily among its own members, as it would under an unbound default
group, and the default group keeps its device. What is lost is only the
split's saving (no new NCCL bootstrap); what is kept is that the group works.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import torch.distributed as dist

_binding = threading.Lock()


@contextlib.contextmanager
def unbound_default_group() -> Iterator[None]:
    """The default group's bound device lifted while the block runs, then restored (a no-op when unbound).

    Reads and writes ``ProcessGroup.bound_device_id``, public since torch 2.3; on a torch without it there is
    no binding to lift.
    """
    world = dist.group.WORLD
    with _binding:
        bound = getattr(world, "bound_device_id", None)
        if bound is None:
            yield
            return
        world.bound_device_id = None
        try:
            yield
        finally:
            world.bound_device_id = bound


def new_group(ranks=None, **kwargs) -> dist.ProcessGroup:
    """``torch.distributed.new_group(ranks, **kwargs)``, made the same way over a bound or an unbound default
    group (see the module's docstring)."""
    with unbound_default_group():
        return dist.new_group(ranks, **kwargs)
