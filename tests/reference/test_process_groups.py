"""Groups made over a default group bound to a device, as ``init_process_group(device_id=...)`` binds it on NCCL.

torch refuses a CPU ``device_id``, so these checks bind the gloo default
group the way torch does after that call (``bound_device_id``, here a
``cuda:0`` this build need not have) and make the project's groups over it:
torch then takes its split path in ``new_group``. Before groups went through
``reference.process_groups.new_group`` the recorder failed there with "No
backend type associated with device type cuda" (torch 2.11 and 2.13 alike:
every recorder check on a one-GPU node), and a gloo group leaving a rank out
failed on that rank with ``perform_nocolor_split`` missing.
"""

from __future__ import annotations

import ast
import contextlib

import torch
import torch.distributed as dist

from ranks.recording import forget_recorders, recording
from reference.process_groups import new_group, unbound_default_group
from tests.pytest_run import ROOT

PRETEND = torch.device("cuda", 0)


@contextlib.contextmanager
def bound_to(device: torch.device):
    world = dist.group.WORLD
    world.bound_device_id = device
    try:
        yield
    finally:
        world.bound_device_id = None


def check_recorder_over_bound_group(ctx) -> tuple[float, int, str]:
    forget_recorders()
    with bound_to(PRETEND):
        recorder = recording(ctx.group)
        t = torch.ones(4) * (ctx.rank + 1)
        dist.all_reduce(t, group=recorder)
        still_bound = str(dist.group.WORLD.bound_device_id)
    forget_recorders()
    return float(t[0]), len(recorder.collectives), still_bound


def test_recorder_is_made_and_records_over_a_bound_default_group(ranks):
    got = ranks.run(check_recorder_over_bound_group)
    total = float(sum(range(1, ranks.world_size + 1)))
    want = [(total, 1, str(PRETEND))] * ranks.world_size
    assert got == want, f"got {got} (sum, collectives recorded, default group's device), but should be {want}"


def check_subgroups_over_bound_group(ctx) -> list[float]:
    """A group of rank 0 alone made by every rank (gloo), then one of this rank alone made by it alone; both
    destroyed after, so the ranks, which serve later checks, keep the same groups (a group made by one rank
    alone that outlives the check gives that rank's later groups other names, and its peers wait forever)."""
    with bound_to(PRETEND):
        first = new_group([0], backend="gloo", timeout=ctx.timeout)
        alone = new_group([ctx.rank], use_local_synchronization=True, timeout=ctx.timeout)
    sums = []
    try:
        for group in (first, alone):
            if group is dist.GroupMember.NON_GROUP_MEMBER:
                sums.append(-1.0)
                continue
            t = torch.full((2,), float(ctx.rank + 1))
            dist.all_reduce(t, group=group)
            sums.append(float(t[0]))
    finally:
        for group in (first, alone):
            if group is not dist.GroupMember.NON_GROUP_MEMBER:
                dist.destroy_process_group(group)
    return sums


def test_subgroups_leaving_ranks_out_are_made_over_a_bound_default_group(ranks):
    got = ranks.run(check_subgroups_over_bound_group)
    want = [[1.0, 1.0]] + [[-1.0, float(r + 1)] for r in range(1, ranks.world_size)]
    assert got == want, f"got {got} (per rank: rank 0's group, its own), but should be {want} (-1: not a member)"


def test_the_binding_is_restored_even_when_making_the_group_fails(group):
    with bound_to(PRETEND):
        try:
            with unbound_default_group():
                assert group.bound_device_id is None, "got a bound device inside, but should be unbound"
                raise ValueError("made to fail")
        except ValueError:
            pass
        assert group.bound_device_id == PRETEND, f"got {group.bound_device_id}, but should be {PRETEND} again"


def test_nothing_else_calls_torch_new_group():
    """Every group goes through ``reference.process_groups.new_group``; a direct call would miss the fix."""
    allowed = ROOT / "reference" / "process_groups.py"
    callers = []
    for path in sorted(ROOT.glob("[a-z]*/**/*.py")):
        if path == allowed or ".tox" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "new_group" and isinstance(node.func.value, ast.Name)):
                callers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not callers, f"got torch's new_group called directly at {callers}, but should go through {allowed.name}"
