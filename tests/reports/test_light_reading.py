"""Reading, comparing and publishing runs never imports torch: a nightly host that only collects the runs (or a
laptop opening them) needs the records, not the training stack. The readers are imported in a fresh interpreter in
which importing torch, pytest, hypothesis or transformers raises."""

import subprocess
import sys

from tests.pytest_run import ROOT

HEAVY = ("torch", "pytest", "_pytest", "hypothesis", "transformers")
READERS = ("reports.store.runs", "reports.store.upgrade", "reports.render.report", "reports.website.build",
           "reports.website.__main__", "reports.compare", "reports.trend", "reports.bisect.search")

BLOCKED_IMPORT = f"""
import importlib, importlib.abc, sys
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HEAVY!r}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Blocked())
for module in sys.argv[1:]:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        print(f"{{module}}: {{exc}}")
"""


def imported_without_heavy(*modules: str) -> list[str]:
    """The modules that could not be imported, each with why."""
    proc = subprocess.run([sys.executable, "-c", BLOCKED_IMPORT, *modules], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.splitlines()


def test_every_reader_of_runs_imports_without_torch():
    failed = imported_without_heavy(*READERS)
    assert not failed, f"got {failed}, but readers should need none of {', '.join(HEAVY)}"


def test_the_block_catches_a_module_that_needs_torch():
    assert imported_without_heavy("benchmarks.measuring.busbw") == ["benchmarks.measuring.busbw: blocked: torch"]
