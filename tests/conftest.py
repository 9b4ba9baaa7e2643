"""The project's own tests may run checks on several ranks too (the ``ranks`` fixture); one smoke run of the main job serves every test that reads a run."""

from pathlib import Path

import pytest
import torch.distributed as dist

from suites.multigpu.harness import plugin as harness_plugin


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    harness_plugin.register(pluginmanager)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The main job in smoke mode, once: every benchmark on tiny inputs, one small suite; its run directory."""
    from reports.nightly.job import main as report_main
    from reports.store.runs import Runs

    out = tmp_path_factory.mktemp("smoke")
    code = report_main(["--smoke", "--impl", "reference", "--suite", "suites/layout/test_golden.py", "--out", str(out)])
    assert code == 0, f"smoke run: got exit {code}, but should be 0"
    return Runs(out).latest()


@pytest.fixture
def group(tmp_path):
    """A one-rank gloo group of our own, destroyed afterwards."""
    if dist.is_initialized():
        pytest.skip("a default process group already exists in this process (torchrun mode)")
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()
