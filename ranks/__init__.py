"""Running one function on every rank, shared by the suites and the benchmarks.

Two ways to get ranks: spawned here, a persistent ``WorkerPool`` of worker
processes meeting through a FileStore (``pool``, ``worker``), or this
process being one of torchrun's (``groups.torchrun_store``). Either way a
function gets a ``RankContext`` and its outcome comes back as an
``outcome.Outcome``. The suites' pytest plugin (suites/multigpu/harness) runs
checks through it; ``run_on_ranks`` runs benchmarks.
"""

from .context import RankContext, requires_peers
from .launch import RanksFailed, run_on_ranks
from .startup import Settings, launched_by_torchrun

__all__ = ["RankContext", "RanksFailed", "Settings", "launched_by_torchrun", "requires_peers", "run_on_ranks"]
