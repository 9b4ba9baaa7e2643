"""A history with a planted regression, to check the bisection on: a copy of this project's tracked files as one
commit, then 15 more, one of which slows the code by a share of itself and one of which makes the same file fail
to import (the next one mends it); the others add a note. ``python -m selfcheck.gate_check --part bisect`` and the
tests bisect it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SLOW_AT, BROKEN_AT, COMMITS = 12, 8, 16
"""Commit numbers (1 is the good end, 16 the bad): 8 is the first commit git bisect tries on this history."""
SLOW_SUBJECT = "planted: slower"
BROKEN = '\nraise ImportError("planted: this commit does not import")\n'


def step_delay(seconds: float) -> str:
    """Code that makes the reference's every step ``seconds`` slower: the core kept busy after its gradient sync, as
    slower code would."""
    return f'''

from fixtures.busy import busy as _planted_busy

_finish_grad_sync_in_time = DistributedDataParallel.finish_grad_sync


def _finish_grad_sync_late(self, *args, **kwargs):  # planted: slower
    _finish_grad_sync_in_time(self, *args, **kwargs)
    _planted_busy({seconds!r})


DistributedDataParallel.finish_grad_sync = _finish_grad_sync_late
'''


def slower_function(name: str, share: float) -> str:
    """Code that makes the module's function ``name`` a ``share`` of itself slower on every call: it waits, busy,
    for that share of the time the call took."""
    return f'''

import time as _planted_time

from fixtures.busy import busy as _planted_busy

_{name}_in_time = {name}


def {name}(*args, **kwargs):  # planted: slower
    start = _planted_time.perf_counter()
    made = _{name}_in_time(*args, **kwargs)
    _planted_busy({share!r} * (_planted_time.perf_counter() - start))
    return made
'''


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=planted", "-c", "user.email=planted@localhost", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout.strip()


def planted_history(repo: Path, source: Path, slow_file: Path, slower: str) -> dict[int, str]:
    """Make the history in ``repo`` from ``source``'s tracked files; commit ``SLOW_AT`` appends ``slower`` to
    ``slow_file``, commit ``BROKEN_AT`` breaks it. Commit number -> sha."""
    tracked = subprocess.run(["git", "ls-files"], cwd=source, capture_output=True, text=True, check=True)
    for rel in tracked.stdout.splitlines():
        if (source / rel).is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / rel, repo / rel)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the project as it is")
    shas = {1: git(repo, "rev-parse", "HEAD")}
    original = (repo / slow_file).read_text()
    for number in range(2, COMMITS + 1):
        if number in (BROKEN_AT, BROKEN_AT + 1):  # broken, then mended
            (repo / slow_file).write_text(original + (BROKEN if number == BROKEN_AT else ""))
        if number == SLOW_AT:
            with open(repo / slow_file, "a") as slowed:
                slowed.write(slower)
            subject = SLOW_SUBJECT
        elif number == BROKEN_AT:
            subject = f"planted: {slow_file.name} does not import"
        else:
            with open(repo / "NOTES.txt", "a") as notes:
                notes.write(f"note {number}\n")
            subject = f"note {number}"
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", subject)
        shas[number] = git(repo, "rev-parse", "HEAD")
    return shas
