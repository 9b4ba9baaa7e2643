"""Reading, comparing and publishing runs never imports torch: a nightly host that only collects the runs (or a
laptop opening them) needs the records, not the training stack. Each reader is imported in a fresh interpreter in
which importing torch, pytest, hypothesis or transformers raises."""

import subprocess
import sys

import pytest

from tests.pytest_run import ROOT

HEAVY = ("torch", "pytest", "_pytest", "hypothesis", "transformers")
READERS = ("reports.store.runs", "reports.store.upgrade", "reports.render.report", "reports.website.build",
           "reports.website.__main__", "reports.compare", "reports.trend")

BLOCKED_IMPORT = f"""
import importlib, importlib.abc, sys
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HEAVY!r}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Blocked())
importlib.import_module(sys.argv[1])
"""


def import_without_heavy(module: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKED_IMPORT, module], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("module", READERS)
def test_a_reader_of_runs_imports_without_torch(module):
    proc = import_without_heavy(module)
    assert proc.returncode == 0, f"import {module}: got {proc.stderr.strip().splitlines()[-1:]}, but should not need " \
                                 f"any of {', '.join(HEAVY)}"


def test_the_block_catches_a_module_that_needs_torch():
    proc = import_without_heavy("benchmarks.measuring.busbw")
    assert proc.returncode != 0 and "blocked: torch" in proc.stderr, proc.stderr
