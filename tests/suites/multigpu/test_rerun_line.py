"""The line a failed multi-rank check prints to rerun it alone starts the ranks the way its session did."""

from pathlib import Path
from types import SimpleNamespace

from ranks.startup import Settings
from suites.multigpu.conftest import rerun_line
from suites.multigpu.harness.plugin import _SETTINGS
from tests.pytest_run import ROOT

NODE = "suites/multigpu/test_vs_torch_ddp.py::test_matches_torch_ddp[allreduce-overlap-tiny]"


def _item(mode: str, world_size: int, options: dict):
    settings = Settings(mode, world_size, 60.0, 120.0, "reference")
    config = SimpleNamespace(rootpath=ROOT, stash={_SETTINGS: settings},
                             getoption=lambda name, default=None: options.get(name, default))
    return SimpleNamespace(config=config, nodeid=NODE, path=Path(ROOT / NODE.split("::")[0]))


def test_under_torchrun_the_line_starts_as_many_processes(monkeypatch):
    monkeypatch.chdir(ROOT)
    line = rerun_line(_item("torchrun", 4, {"impl": "mine", "device": "cuda"}), None)
    assert line == f"torchrun --nproc-per-node=4 -m pytest '{NODE}' --impl mine --device cuda", (
        f"got {line!r}, but should rerun it on the 4 processes torchrun started, on their device")


def test_under_plain_pytest_the_line_spawns_the_sessions_world_size(monkeypatch):
    monkeypatch.chdir(ROOT)
    line = rerun_line(_item("plain", 3, {"impl": "mine", "world_size": 3}), None)
    assert line == f"pytest '{NODE}' --impl mine --world-size 3", line
