"""One benchmark run of one commit, in its own worktree: the commit's own nightly job, restricted to what the
figure needs, writes a run; the figure's samples are read from it through this project's store (which reads
every schema a commit may have written)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..store.runs import RunError, Runs


class MeasureError(RuntimeError):
    """The commit could not be measured: its run failed, wrote nothing, or lacks the figure."""


@dataclass(frozen=True)
class Measurement:
    """How a commit is measured: ``command`` (``{python}`` and ``{out}``, a fresh runs root, filled in) run in
    the commit's worktree, then ``metric`` read from the run it wrote."""

    command: tuple[str, ...]
    metric: str
    limit_s: float = 600.0

    def run(self, worktree: Path) -> tuple[float, ...]:
        """The figure's samples (its value alone when it kept none)."""
        with tempfile.TemporaryDirectory(prefix="ddpc-bisect-run-") as tmp:
            out = Path(tmp) / "runs"
            argv = [part.replace("{python}", sys.executable).replace("{out}", str(out)) for part in self.command]
            env = {**os.environ, "PYTHONPATH": str(worktree)}
            for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
                env.pop(name, None)
            try:
                proc = subprocess.run(argv, cwd=worktree, env=env, capture_output=True, text=True,
                                      timeout=self.limit_s)
            except subprocess.TimeoutExpired:
                raise MeasureError(f"{shlex.join(argv)} ran past {self.limit_s:g} s") from None
            runs = Runs(out)
            names = runs.names() if out.is_dir() else []
            if not names:
                last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                raise MeasureError(f"exit {proc.returncode}, no run written: {last[0][:300]}")
            try:
                results = runs.load(names[-1])
            except RunError as exc:
                raise MeasureError(f"its run cannot be read: {exc}") from None
        metric = results.metrics.get(self.metric)
        if metric is None:
            raise MeasureError(f"its run has no metric {self.metric!r} (it has {len(results.metrics)}, e.g. "
                               f"{', '.join(sorted(results.metrics)[:5])})")
        if metric.figure is not None and metric.figure.samples:
            return tuple(metric.figure.samples)
        return (metric.value,)


def default_command(benchmark: str, rounds: int | None, world_size: int, impls: Sequence[str]) -> tuple[str, ...]:
    """The commit's own nightly job with one benchmark and nothing else: sampled as the nightly job samples it
    (to its targets), or ``rounds`` fixed rounds."""
    return ("{python}", "-m", "reports", "--benchmark", benchmark, *(("--rounds", str(rounds)) if rounds else ()),
            "--world-size", str(world_size), *(a for impl in impls for a in ("--impl", impl)), "--no-suites",
            "--no-strength", "--no-site", "--out", "{out}")
