"""The checks run against a mutant of each module: those that can reach its code, likeliest killers first.

The set sets what a survivor costs, the order what a killed mutant costs
(``-x`` stops at the first failure). What reaches what:

- the layout suite calls an implementation's ``plan`` and ``build`` only: the
  planner, its policies and the buffer. It never wraps a model, so DDP, bucket
  groups, the optimizer, clipping, finalize and ``DDPConfig`` are beyond it
  (the suite plugin imports ``DDPConfig`` for an ``isinstance`` test only);
- the multigpu suite trains through every runtime module, and builds its
  buffers through the planner;
- ``tests/reference/test_config_errors.py`` and ``tests/reference/test_api.py`` check
  what an adapter cannot reach: the errors and defaults of ``LayoutConfig``,
  ``DDPConfig``, the planner's helpers and ``ReferenceOptimizer``'s default norm.

A directory stands for every test module under it not listed before it, in
name order, the slow ones of ``LAST`` at its end: a test module added later is
run without being listed here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

PYTEST = (sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--hypothesis-profile=strength",
          "--pg-timeout=30")
LAYOUT = "suites/layout"
MULTIGPU = "suites/multigpu"
OWN_API = ("tests/reference/test_config_errors.py", "tests/reference/test_api.py")
LAST = ("suites/multigpu/test_bad_input.py",)  # waits out its ranks' failures: ~12 s before a first kill elsewhere
STEPPING = ("suites/multigpu/test_compositions.py", "suites/multigpu/test_vs_torch_ddp.py",
            "suites/multigpu/test_experts.py")  # every step: clipping, norms, zero counts, the optimizer
SYNCING = ("suites/multigpu/test_vs_torch_ddp.py", "suites/multigpu/test_overlap.py",
           "suites/multigpu/test_no_sync.py")  # one step's reduced grads first, then when collectives run

CHECKS: dict[str, tuple[str, ...]] = {
    "reference/layout/planner.py": (LAYOUT, *OWN_API, MULTIGPU),
    "reference/layout/policies.py": (LAYOUT, *OWN_API, MULTIGPU),
    "reference/buffer.py": (LAYOUT, MULTIGPU),
    "reference/config.py": (*OWN_API, *SYNCING, MULTIGPU),
    "reference/clip.py": (*OWN_API, *STEPPING, MULTIGPU),
    "reference/optimizer.py": (*OWN_API, *STEPPING, MULTIGPU),
    "reference/finalize.py": ("suites/multigpu/test_finalize.py", *STEPPING, MULTIGPU),
    "reference/bucket_group.py": (*OWN_API, *SYNCING, MULTIGPU),
    "reference/ddp.py": (*SYNCING, MULTIGPU),
    "reference/reduction_groups.py": (*SYNCING, MULTIGPU),
}
MODULES = tuple(CHECKS)


def ordered_test_files(paths: Iterable[str], tree: Path) -> list[str]:
    """``paths`` in order, each directory expanded to its test modules not yet listed."""
    chosen: list[str] = []
    for path in paths:
        if (tree / path).is_dir():
            found = sorted(str(p.relative_to(tree)) for p in (tree / path).rglob("*.py")
                           if p.name.startswith("test_") or p.name.endswith("_test.py"))
            found.sort(key=lambda name: name in LAST)
            chosen += [name for name in found if name not in chosen]
        elif path not in chosen:
            chosen.append(path)
    return chosen


def command(modules: Sequence[str], tree: Path) -> list[str]:
    """The pytest command that checks a mutant of any of ``modules`` (one module, or all for the baseline)."""
    return [*PYTEST, *ordered_test_files((path for module in modules for path in CHECKS[module]), tree)]
