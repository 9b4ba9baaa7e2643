"""The megatron-core adapter on its own: on a GPU image, when upstream's optimizer declines a step, a field once.

Upstream's ``ChainedOptimizer.step`` answers ``ok=False`` for a step skipped
for its grad norm and for one its loss scaler found inf grads in; the first is
asked for, the second must raise.

On a GPU image Transformer Engine or Apex is installed, and torch's
optimizers must still be built. A stand-in Apex (``apex.optimizers`` with a
fused Adam and SGD of its own, and a version) is put on the path of a child
process, so megatron-core finds it at import as it would on an NGC image and
binds its classes; the adapter must still hand upstream's factory torch's. A
stand-in Transformer Engine would need much of its API, which megatron-core
reads at import; it binds the same names (``suites/impls/megatron_fused.py``)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from suites.impls.megatron_cpu import installed_version
from tests.pytest_run import ROOT


pytestmark = pytest.mark.skipif(installed_version() is None, reason="megatron-core is not installed")

FUSED = '''
import torch


class FusedAdam(torch.optim.Optimizer):
    """A fused optimizer as megatron-core would build it: never to be stepped here."""

    def __init__(self, params, **kwargs):
        super().__init__(params, kwargs)

    def step(self, closure=None):
        raise RuntimeError("the stand-in fused optimizer was stepped")


class FusedSGD(FusedAdam):
    pass
'''

BUILD = '''
import json, tempfile
import torch, torch.distributed as dist
from reference.config import DDPConfig
from suites.impls.megatron_core import implementation as megatron
import megatron.core.optimizer as upstream

dist.init_process_group("gloo", store=dist.FileStore(tempfile.mktemp(), 1), rank=0, world_size=1)
built = {}
for policy in ("packed", "padded"):
    for name, make in (("sgd", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
                       ("adam", lambda p: torch.optim.Adam(p, lr=1e-2))):
        model = torch.nn.Linear(8, 8)
        ddp = megatron.wrap(model, DDPConfig(policy=policy), dist.group.WORLD)
        model(torch.ones(2, 8)).sum().backward()
        ddp.finish_grad_sync()
        optimizer = megatron.make_optimizer(ddp, make)
        optimizer.step()
        built[f"{policy} {name}"] = [f"{type(o.optimizer).__module__}.{type(o.optimizer).__name__}"
                                     for o in optimizer.raw.chained_optimizers]
print(json.dumps({"bound": f"{upstream.SGD.__module__}.{upstream.SGD.__name__}", "built": built,
                  "header": megatron.report_lines()}))
'''


SKIP = '''
import json, tempfile
import torch, torch.distributed as dist
from reference.config import DDPConfig
from suites.impls.megatron_core import implementation as megatron

dist.init_process_group("gloo", store=dist.FileStore(tempfile.mktemp(), 1), rank=0, world_size=1)
if "grad_norm_skip_threshold" not in megatron.knobs:
    print(json.dumps({"knobs": sorted(megatron.knobs)}))
    raise SystemExit
model = torch.nn.Linear(8, 8)
ddp = megatron.wrap(model, DDPConfig(policy="padded"), dist.group.WORLD)
optimizer = megatron.make_optimizer(ddp, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                                    grad_norm_skip_threshold=1e-3)
before = model.weight.detach().clone()
model(torch.ones(2, 8)).sum().backward()
ddp.finish_grad_sync()
norm = optimizer.step()
skipped = {"norm": norm, "unchanged": bool(torch.equal(model.weight, before))}
# What upstream's loss scaler reports for inf or NaN grads (fp16): step answers (False, None, None).
optimizer.raw.prepare_grads = lambda: True
try:
    optimizer.step()
    raised = None
except RuntimeError as exc:
    raised = str(exc)
print(json.dumps({"knobs": sorted(megatron.knobs), "skipped": skipped, "raised": raised}))
'''


def _run(script: str, *paths: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (ROOT, *paths))}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_step_skipped_for_its_grad_norm_returns_the_norm_and_one_declined_for_inf_grads_raises():
    got = _run(SKIP)
    if "grad_norm_skip_threshold" not in got["knobs"]:
        pytest.skip(f"megatron-core {installed_version()} has no grad_norm_skip_threshold")
    assert got["skipped"]["norm"] > 1e-3 and got["skipped"]["unchanged"], got["skipped"]
    assert got["raised"] and "non-finite" in got["raised"], f"a step over inf grads: got {got['raised']!r}"


def test_with_apex_installed_the_optimizer_is_torchs(tmp_path):
    (tmp_path / "apex").mkdir()
    (tmp_path / "apex" / "__init__.py").write_text("")
    (tmp_path / "apex" / "optimizers.py").write_text(FUSED)
    metadata = tmp_path / "apex-9.9.dist-info"
    metadata.mkdir()
    (metadata / "METADATA").write_text("Metadata-Version: 2.1\nName: apex\nVersion: 9.9\n")
    (metadata / "top_level.txt").write_text("apex\n")
    got = _run(BUILD, tmp_path)
    assert got["bound"] == "apex.optimizers.FusedSGD", f"megatron-core bound {got['bound']}, not the stand-in"
    want = {"sgd": "torch.optim.sgd.SGD", "adam": "torch.optim.adam.Adam"}
    for what, classes in got["built"].items():
        assert classes == [want[what.split()[1]]], f"{what}: got {classes}, but should be torch's"
    assert "Apex 9.9 found" in got["header"][0], got["header"]


def test_a_knob_that_is_also_a_field_the_adapter_passes_is_passed_once(group, monkeypatch):
    """A field the adapter passes by name (``check_for_nan_in_grad``) that also becomes a knob reaches upstream's
    config once, with its value (it was passed twice: a TypeError)."""
    import torch

    from reference.config import DDPConfig
    from suites.impls.megatron_core import implementation as megatron
    from suites.impls.protocol import KNOBS

    monkeypatch.setitem(KNOBS, "check_for_nan_in_grad", "an upstream field that became a knob")
    ddp = megatron.wrap(torch.nn.Linear(8, 8), DDPConfig(check_for_nan_in_grad=True), group)
    assert ddp.raw.ddp_config.check_for_nan_in_grad is True
