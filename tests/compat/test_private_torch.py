"""Every private torch name the project reads goes through ``compat.private_torch``, and each fallback works.

The GPU image's torch 2.11 lacked ``_DEFAULT_BUCKET_CAP_MB``, and the main job
crashed on import. So the code is scanned for any private torch read outside
``compat``, and each fallback runs here with the name taken away, its result
held against torch's own where torch has the name (the cross-section envs run
these on torch 2.11 and the newest torch too).
"""

from __future__ import annotations

import ast
import sys

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import distributed as torch_ddp

from compat import private_torch
from tests.pytest_run import ROOT

PACKAGES = ("reference", "ranks", "suites", "benchmarks", "reports", "fixtures")
# Private members of the torch classes the project handles, read on an object (``pg._get_backend``, ``t._base``).
TORCH_CLASSES = (dist.ProcessGroup, dist.Work, torch.nn.parallel.DistributedDataParallel, torch.Tensor, torch.nn.Module,
                 torch.optim.Optimizer)
MEMBERS_PRIVATE = {n for cls in TORCH_CLASSES for n in dir(cls) if n.startswith("_") and not n.startswith("__")}


def private_reads(source: str) -> list[str]:
    """Private torch names a module's source reads: attributes of a torch module reached through an import,
    private names imported from torch, and a process group's private methods called on another object."""
    tree = ast.parse(source)
    torch_names = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    torch_names.add(alias.asname or "torch")
                    found += [f"import {alias.name}"] * _is_private_path(alias.name)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            for alias in node.names:
                torch_names.add(alias.asname or alias.name)
                if _is_private_path(node.module) or _is_private(alias.name):
                    found.append(f"from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain, root = _chain(node)
            private = [i for i, name in enumerate(chain) if _is_private(name)]
            if root in torch_names and private:
                found.append(".".join([root, *chain[:private[0] + 1]]))
            elif (node.attr in MEMBERS_PRIVATE and isinstance(node.ctx, ast.Load)
                  and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found.append(f"<object>.{node.attr}")
    return sorted(set(found))


def _chain(node: ast.Attribute) -> tuple[list[str], str | None]:
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return list(reversed(attrs)), node.id if isinstance(node, ast.Name) else None


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_private_path(dotted: str) -> bool:
    return any(map(_is_private, dotted.split(".")))


def test_the_scan_finds_each_kind_of_private_read():
    """The scan itself, on reads like those the project made before ``compat``: each is found."""
    source = "\n".join([
        "import torch", "import torch.distributed as dist", "from torch.nn.parallel import distributed as d",
        "from torch.distributed import distributed_c10d as c10d",
        "from torch.distributed._composable.replicate_with_fsdp import replicate",
        "a = d._DEFAULT_BUCKET_CAP_MB", "dist._coalescing_manager(group=None)", "torch.cuda._sleep(1)",
        "c10d._world.pg_map", "inner._get_backend('cpu')", "torch.__version__", "self._start_coalescing",
    ])
    assert private_reads(source) == sorted([
        "<object>._get_backend", "c10d._world", "d._DEFAULT_BUCKET_CAP_MB", "dist._coalescing_manager",
        "from torch.distributed._composable.replicate_with_fsdp import replicate", "torch.cuda._sleep"])


def test_no_module_reads_a_private_torch_name_but_compat():
    offenders = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            reads = private_reads(path.read_text())
            if reads:
                offenders[str(path.relative_to(ROOT))] = reads
    assert not offenders, (f"got private torch names read outside compat/private_torch.py: {offenders}, but each "
                           "should be read there with a fallback (and listed in its READS)")


def test_every_private_name_compat_reads_is_listed():
    """Each private name ``compat.private_torch`` reads (an attribute, a name given to ``getattr``, a module it
    imports) appears in ``READS``, with who reads it and the fallback."""
    tree = ast.parse((ROOT / "compat" / "private_torch.py").read_text())
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    own |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
        elif isinstance(node, ast.ImportFrom):
            names.update(node.module.split("."))
    listed = " ".join(r.name for r in private_torch.READS)
    missing = sorted(n for n in names - own if _is_private(n) and n not in listed)
    assert not missing, f"got private names read but not listed in compat.private_torch.READS: {missing}"
    assert all(r.read_by and r.fallback for r in private_torch.READS), "each read says who reads it and the fallback"


# torch DDP's defaults: the fallbacks are torch's own values, wherever torch has them.

def test_torch_ddps_default_bucket_cap_falls_back_to_its_documented_25_mib(group, monkeypatch):
    model = torch.nn.Linear(4, 4)
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    want_bytes = ddp.bucket_bytes_cap  # what torch DDP itself uses when told no cap
    assert private_torch.ddp_default_bucket_cap_mb() * 2**20 == want_bytes
    monkeypatch.delattr(torch_ddp, "_DEFAULT_BUCKET_CAP_MB", raising=False)
    got = private_torch.ddp_default_bucket_cap_mb() * 2**20
    assert got == want_bytes, f"fallback cap: got {got} bytes, but should be torch DDP's own {want_bytes}"


def test_the_first_bucket_falls_back_to_the_reducers_1_mib(monkeypatch):
    present = getattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES", None)
    monkeypatch.delattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES", raising=False)
    got = private_torch.ddp_first_bucket_bytes()
    assert got == 2**20, f"fallback first bucket: got {got}, but should be 1 MiB (reducer.hpp)"
    if present is not None:
        assert got == present, f"fallback {got} differs from this torch's own {present}"


class Shared(torch.nn.Module):
    """What the reducer's param order must get right: a shared param, a frozen one, a sparse embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4, sparse=True)
        self.dense = torch.nn.Embedding(10, 4)
        self.first = torch.nn.Linear(4, 4)
        self.frozen = torch.nn.Linear(4, 4)
        self.frozen.weight.requires_grad_(False)
        self.second = torch.nn.Linear(4, 4)
        self.second.weight = self.first.weight  # shared: counted once, where first seen


def test_the_reducer_order_falls_back_to_torchs_own(group, monkeypatch):
    ddp = torch.nn.parallel.DistributedDataParallel(Shared(), process_group=group)
    want_params, want_sparse = ddp._build_params_for_reducer()  # torch's own, the oracle
    monkeypatch.delattr(torch.nn.parallel.DistributedDataParallel, "_build_params_for_reducer")
    got_params, got_sparse = private_torch.params_for_reducer(ddp)
    names = {p: n for n, p in ddp.module.named_parameters()}
    assert [names[p] for p in got_params] == [names[p] for p in want_params], "param order differs from torch's"
    assert got_sparse == want_sparse, f"expect_sparse: got {got_sparse}, but should be {want_sparse}"


def test_without_torchs_bucket_assignment_the_torch_adapter_claims_no_layout(group, monkeypatch):
    from suites.impls.torch_ddp import implementation
    from reference.config import DDPConfig

    # torch DDP itself calls it while it is made: a torch without it is imitated where the adapter asks for it
    monkeypatch.setattr(private_torch, "bucket_assignment_by_size", lambda: None)
    assert implementation.capabilities == {"ddp", "checkpoint"}, implementation.capabilities
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    handle = implementation.wrap(model, DDPConfig(overlap_grad_reduce=True), group)
    assert handle.declared_layouts is None, "no bucket layout may be declared without torch's assignment"
    model(torch.ones(3, 4)).sum().backward()
    handle.finish_grad_sync()
    [buffer] = handle.buffers
    want = torch.cat([p.grad.reshape(-1) for p in reversed(list(model.parameters()))])
    assert torch.equal(buffer.grad_data, want), "grads read through the one bucket differ from param.grad"


# Collectives and the recorder.

def check_reference_coalescing(ctx, take_away: bool) -> tuple[list[float], list[bool]]:
    """Two buckets (72 elements each: 64 + 8 per layer) in one bucket group, reduced through a recorder; with
    ``take_away``, torch's coalescing manager is missing while the group is made and reduced."""
    from ranks.recording import forget_recorders, recording
    from reference.config import DDPConfig
    from reference.ddp import DistributedDataParallel

    forget_recorders()
    recorder = recording(ctx.group)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    kept = dist._coalescing_manager
    if take_away:
        del dist._coalescing_manager
    try:
        config = DDPConfig(bucket_size=64, buckets_per_group=2, overlap_grad_reduce=True)
        ddp = DistributedDataParallel(model, config, recorder)
        ddp(torch.full((2, 8), float(ctx.rank + 1))).sum().backward()
        ddp.finish_grad_sync()
    finally:
        dist._coalescing_manager = kept
    coalesced = [c.coalesced for c in recorder.collectives if c.reduces]
    forget_recorders()
    return [float(p.main_grad.sum()) for p in model.parameters()], coalesced


def test_without_the_coalescing_manager_buckets_are_reduced_one_by_one_to_the_same_grads(ranks):
    with_it = ranks.run(check_reference_coalescing, False)
    without = ranks.run(check_reference_coalescing, True)
    assert [g for g, _ in without] == [g for g, _ in with_it], (
        f"reduced grads: got {[g for g, _ in without]} without the manager, but should be those with it "
        f"{[g for g, _ in with_it]}")
    assert [c for _, c in with_it] == [[True]] * ranks.world_size, (
        f"with the manager: got launches coalesced {[c for _, c in with_it]}, but should be one coalesced launch")
    assert [c for _, c in without] == [[False, False]] * ranks.world_size, (
        f"without it: got launches coalesced {[c for _, c in without]}, but should be one plain launch per bucket")


def test_a_backend_registered_twice_is_taken_as_registered_where_torch_hides_its_plugins(monkeypatch):
    monkeypatch.setattr(private_torch, "registered_backends", lambda: None)
    creator = lambda *a: None  # noqa: E731 - never called: no group is made
    private_torch.register_backend_once("ddpc_test_twice", creator, ["cpu"])
    private_torch.register_backend_once("ddpc_test_twice", creator, ["cpu"])


def test_without_c10ds_group_map_the_recorder_still_records(group, monkeypatch):
    import types

    from ranks.recording import forget_recorders, recording

    forget_recorders()
    monkeypatch.setattr(private_torch, "c10d", types.SimpleNamespace())  # torch keeps no _world here
    recorder = recording(group)
    t = torch.ones(3)
    dist.all_reduce(t, group=recorder)
    kinds = [c.kind for c in recorder.collectives]
    forget_recorders()
    assert kinds == ["all_reduce"], f"recorded: got {kinds}, but should be one all_reduce"


def test_groups_without_backend_registration_are_left_as_they_are():
    class Bare:
        pass

    group, inner = Bare(), Bare()
    private_torch.show_backend_behind(group, inner)
    assert vars(group) == {} and vars(inner) == {}


def test_a_group_without_coalescing_hooks_names_what_to_do():
    with pytest.raises(NotImplementedError, match="launch the collectives one by one"):
        private_torch.forward_coalescing(object(), "start", "cpu")


def test_without_tensor_bases_views_cannot_be_read_and_say_so(monkeypatch):
    buffer = torch.zeros(8)
    view = buffer[2:6]
    assert private_torch.view_base(view)[0] is buffer and private_torch.view_base(buffer) == (None, None)
    monkeypatch.setattr(private_torch, "tensors_tell_their_base", lambda: False)  # a C type's member stays
    base, why = private_torch.view_base(view)
    assert base is None and "Tensor._base" in why, (base, why)


# Composable replicate, CUDA's spin, autograd's callback.

def test_without_replicate_the_adapter_is_unavailable_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.distributed._composable.replicate_with_fsdp", None)
    apply, why = private_torch.replicate()
    assert apply is None and "replicate_with_fsdp" in why, (apply, why)
    monkeypatch.undo()
    apply, why = private_torch.replicate()
    assert apply is not None and why is None, f"this torch has replicate: got {why}"


def test_without_cudas_spin_a_chain_of_kernels_stands_in(monkeypatch):
    if hasattr(torch.cuda, "_sleep"):
        assert private_torch.cuda_spin() is torch.cuda._sleep and private_torch.cuda_spin_is_one_kernel()
        monkeypatch.delattr(torch.cuda, "_sleep")
    assert private_torch.cuda_spin() is private_torch._kernel_chain
    assert not private_torch.cuda_spin_is_one_kernel(), "the chain is many kernels: no per-layer timeline"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the chain of kernels runs on a GPU only")
def test_the_chain_of_kernels_holds_the_stream_longer_for_more_cycles():
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for cycles in (10**6, 10**7):
        start.record()
        private_torch._kernel_chain(cycles)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    assert times[1] > 3 * times[0], f"10x the cycles: got {times} ms, but should take several times longer"


def check_example_finishes_without_autograds_callback(ctx) -> tuple[list[list[float]], list[list[float]]]:
    """The example's grads after ``finish_grad_sync``, autograd's callback unavailable; and, worked out on one
    process, the grads at the mean input (rank r feeds r + 1, and the grads are affine in the input)."""
    import copy
    from unittest import mock

    from fixtures.examples import bucketed_hooks

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    alone = copy.deepcopy(model)
    wrapped = bucketed_hooks.factory(model, ctx.group)
    with mock.patch.object(bucketed_hooks, "queue_backward_callback", return_value=False) as queue:
        wrapped(torch.full((2, 8), float(ctx.rank + 1))).sum().backward()
    assert queue.called, "the example should ask for autograd's callback"
    wrapped.finish_grad_sync()
    mean = sum(range(1, ctx.world_size + 1)) / ctx.world_size
    alone(torch.full((2, 8), mean)).sum().backward()
    return ([p.grad.reshape(-1).tolist() for p in model.parameters()],
            [p.grad.reshape(-1).tolist() for p in alone.parameters()])


def test_the_example_finishes_in_finish_grad_sync_where_autograd_cannot_call_back(ranks):
    for got, want in ranks.run(check_example_finishes_without_autograds_callback):
        for g, w in zip(got, want):
            assert g == pytest.approx(w, abs=1e-6), f"grads after finish_grad_sync: got {g}, but should be {w}"


def _queue(called: list):
    def hook(grad):
        queued = private_torch.queue_backward_callback(lambda: called.append("after backward"))
        called.append(f"queued: {queued}")
    return hook


def test_autograds_callback_runs_after_backward_where_torch_has_it():
    called: list = []
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(_queue(called))
    y.sum().backward()
    assert called == ["queued: True", "after backward"], called
