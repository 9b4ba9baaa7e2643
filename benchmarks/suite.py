"""Every benchmark of a run: the multi-rank ones in one launch (one set of ranks), then the single-process ones.

The relaunched benchmarks (step time) then run again on fresh ranks,
``BenchSettings.launches`` launches in all, each carrying on the rounds of
the launches before it; under torchrun, which starts the ranks once, only one.

A rank that dies (a signal, an abort inside a peer's library) ends its
launch: each rank notes in a journal which benchmark it is in and which it
finished (rank 0 with their records), so the benchmarks every rank finished
are kept, the one it died in becomes a ``BenchmarkFault``, and fresh ranks
run the rest.

Ranks are spawned here (``--world-size`` of them, gloo on CPU, NCCL when
every rank has a GPU) or are torchrun's, over one node or several. Every
rank returns the same records; each node's first rank also describes its
node while the benchmarks run (``hardware.node``), so a run records every
node it ran on. The single-process benchmarks run once, in the process that
writes the run (rank 0), after the ranks have left their group: under
torchrun, running them on every rank would time each one under as many
copies of itself as the node has ranks.
"""

from __future__ import annotations

import pickle
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from ranks import RanksFailed, launched_by_torchrun, run_on_ranks

from hardware.node import NodeProbe, first_rank_of_node

from . import BENCHMARKS
from .registry import BenchmarkFault
from .settings import BenchSettings

Progress = Callable[[str], None]


def selected(names: Sequence[str] | None):
    known = [b.name for b in BENCHMARKS]
    unknown = sorted(set(names or ()) - set(known))
    if unknown:
        raise ValueError(f"benchmark: got {unknown}, but should be among {', '.join(known)}")
    return [b for b in BENCHMARKS if names is None or b.name in names]


def _on_every_rank(ctx, settings: BenchSettings, names: list[str], journal: str | None = None) -> dict:
    """``{benchmark name: records}`` of those that finished here, the node's description, and the fault of one
    that raised (``fault``): after it nothing runs, as another rank may still be inside one of its collectives,
    and waits there until the group's timeout. Under torchrun a fault still ends the job: its ranks return their
    results over the control group, which a rank still inside the benchmark may be using. ``journal``: a folder
    where this rank notes each benchmark it starts and finishes (rank 0 with its records), read back when a rank
    dies (``_salvaged``)."""
    probe = NodeProbe(ctx) if first_rank_of_node(ctx) else None
    out, fault = {}, None
    chosen = [b for b in BENCHMARKS if b.name in names]
    for i, benchmark in enumerate(chosen):
        start = time.monotonic()
        _note(journal, ctx.rank, "start", benchmark.name)
        try:
            out[benchmark.name] = benchmark.run(ctx, settings)
        except Exception as exc:  # noqa: BLE001 - one benchmark's fault must not lose the others' records
            if launched_by_torchrun():
                raise  # torchrun's ranks return their results over the control group another rank may still use
            fault = BenchmarkFault.of(benchmark.name, ctx.rank, exc, [b.name for b in chosen[i + 1:]])
            print(f"[benchmarks] {benchmark.name} raised on rank {ctx.rank}: {fault.error}", file=sys.stderr,
                  flush=True)
            break
        _note(journal, ctx.rank, "done", benchmark.name, out[benchmark.name])
        if ctx.rank == 0:
            print(f"[benchmarks] {benchmark.name}: {time.monotonic() - start:.1f}s", file=sys.stderr, flush=True)
    out["node"] = probe.finish() if probe else None
    out["fault"] = fault
    return out


def _note(journal: str | None, rank: int, event: str, name: str, records=None) -> None:
    """One line of this rank's journal; rank 0 writes a finished benchmark's records before the line says so."""
    if journal is None:
        return
    if event == "done" and rank == 0:
        (Path(journal) / f"{name}.pickle").write_bytes(pickle.dumps(records))
    with open(Path(journal) / f"rank-{rank}", "a") as f:
        f.write(f"{event} {name}\n")


def _salvaged(journal: str, names: Sequence[str], world_size: int) -> tuple[dict, str | None]:
    """From the journal of a launch a rank died in: ``{name: records}`` of the benchmarks every rank finished,
    and the first one some rank started but not every rank finished (None: it died outside every benchmark)."""
    paths = [Path(journal) / f"rank-{rank}" for rank in range(world_size)]
    events = [set(path.read_text().splitlines()) if path.exists() else set() for path in paths]
    finished = [n for n in names if all(f"done {n}" in e for e in events)]
    died_in = next((n for n in names if n not in finished and any(f"start {n}" in e for e in events)), None)
    return {n: pickle.loads((Path(journal) / f"{n}.pickle").read_bytes()) for n in finished}, died_in


def _launch(settings: BenchSettings, world_size: int, names: list[str], device: str, results: dict,
            progress: Progress) -> list[str] | None:
    """One launch of the ranks over ``names``, its records and faults added to ``results``; the benchmarks left
    to run on fresh ranks when a rank died, or None when none are. A death before any benchmark finished or
    began raises: nothing was lost and nothing was learned by relaunching."""
    with tempfile.TemporaryDirectory(prefix="ddpc-benchmarks-") as journal:
        try:
            per_rank = run_on_ranks(_on_every_rank, world_size, settings, names, journal, device=device)
        except RanksFailed as exc:
            if launched_by_torchrun():
                raise  # torchrun's ranks are this job's own: none are fresh, and each keeps a journal of its own
            print(f"[benchmarks] the ranks failed:\n{exc}", file=sys.stderr, flush=True)
            kept, died_in = _salvaged(journal, names, world_size)
            if died_in is None and not kept:
                raise
            results.update(kept)
            gone = [*kept, *([died_in] if died_in else [])]
            rest = [n for n in names if n not in gone and names.index(n) > max(names.index(g) for g in gone)]
            if died_in is not None:
                results["faults"].append(_died(died_in, exc))
                again = _crashed(exc) and all(f.benchmark != died_in for f in results["faults"][:-1])
                progress(f"benchmark {died_in}: a rank died in it ({results['faults'][-1].error}); "
                         f"kept {', '.join(kept) or 'nothing'} before it"
                         + ("; it runs again on fresh ranks, once (a crash below Python may not come back)"
                            if again else ""))
                rest = [died_in, *rest] if again else rest
            return rest
    results["nodes"] = sorted((r.pop("node") for r in per_rank if r.get("node")), key=lambda n: n.node_rank)
    results["faults"] += [fault for r in per_rank if (fault := r.pop("fault")) is not None]
    # A benchmark's records count where every rank finished it: one that raised on a rank is that rank's fault.
    for benchmark in (b for b in BENCHMARKS if b.name in names and all(b.name in r for r in per_rank)):
        results[benchmark.name] = per_rank[0][benchmark.name]
    return None


def _died(name: str, exc: RanksFailed) -> BenchmarkFault:
    """The fault of a launch a rank died in: the first failing rank, and what each failing rank's outcome says
    first (the pool's words for a rank that died or was killed) or last (what a rank's traceback ends with)."""
    def said(detail: str) -> str:
        lines = detail.strip().splitlines() or [""]
        return lines[0] if lines[0].startswith("rank ") else lines[-1]
    return BenchmarkFault(name, exc.failed[0].rank if exc.failed else None,
                          f"RanksFailed: {'; '.join(said(o.detail) for o in exc.failed) or exc}"[:500], ())


def _crashed(exc: RanksFailed) -> bool:
    """Whether a rank died of a signal (``Outcome.signal``): a crash below Python, not a benchmark that raised."""
    return any(o.signal is not None for o in exc.failed)


def launches_problem(launches: int) -> str | None:
    """Why ``launches`` cannot run here, or None: torchrun's ranks are started once, so there are none to relaunch."""
    if launches > 1 and launched_by_torchrun():
        return (f"launches: got {launches}, but should be 1 under torchrun: it starts the ranks once, so there are "
                "no fresh ranks to launch again (run without torchrun for more launches)")
    return None


def run_rank_benchmarks(settings: BenchSettings, world_size: int, names: Sequence[str] | None = None,
                        progress: Progress = print, device: str = "auto") -> dict:
    """``{benchmark name: records}`` of the multi-rank benchmarks that finished, plus ``nodes``: every node, a
    ``hardware.node.Node``, by node rank, and ``faults``: a ``BenchmarkFault`` of each rank where one raised, and
    of each benchmark a rank died in.

    The ranks start even when no multi-rank benchmark is selected: every node
    is still described, and the run's setup names its devices.
    """
    problem = launches_problem(settings.launches)
    if problem:
        raise ValueError(problem)
    on_ranks = [b.name for b in selected(names) if b.on_ranks]
    results: dict = {"nodes": [], "faults": []}
    progress(f"benchmarks on {world_size} ranks: {', '.join(on_ranks) or 'none; describing the nodes'}")
    rest = _launch(settings, world_size, on_ranks, device, results, progress)
    while rest is not None:  # a rank died: fresh ranks for the rest (and, once, for one it crashed in)
        progress(f"benchmarks on {world_size} fresh ranks after a rank died: "
                 f"{', '.join(rest) or 'none; describing the nodes'}")
        try:
            rest = _launch(settings, world_size, rest, device, results, progress)
        except RanksFailed as exc:
            if rest:
                results["faults"].append(replace(_died(rest[0], exc), skipped=tuple(rest[1:])))
            progress(f"the fresh ranks failed before any benchmark: {exc}")
            break
    results["faults"] = [replace(f, recovered=True) if f.benchmark in results and f.rank is not None
                         and f.relaunch is None else f for f in results["faults"]]
    finished = [b for b in BENCHMARKS if b.name in results]
    for benchmark in finished:
        benchmark.check(results[benchmark.name])
    again = [b.name for b in finished if b.relaunched]
    for launch in range(2, settings.launches + 1) if again else ():
        progress(f"benchmarks on {world_size} fresh ranks, launch {launch} of {settings.launches}: "
                 f"{', '.join(again)}")
        try:
            records = run_on_ranks(_carry_on, world_size, settings, {name: results[name] for name in again},
                                   device=device)[0]
        except Exception as exc:  # noqa: BLE001 - the launches before it stand
            results["faults"].append(BenchmarkFault.of(", ".join(again), None, exc, relaunch=launch))
            break
        for benchmark in (b for b in BENCHMARKS if b.name in again):
            benchmark.check(records[benchmark.name])
            results[benchmark.name] = records[benchmark.name]
    return results


def _carry_on(ctx, settings: BenchSettings, earlier: dict) -> dict:
    """One more launch of the relaunched benchmarks, each carrying on its records so far."""
    return {benchmark.name: benchmark.run(ctx, settings, earlier[benchmark.name])
            for benchmark in BENCHMARKS if benchmark.name in earlier}


def run_single_process_benchmarks(settings: BenchSettings, names: Sequence[str] | None = None,
                                  progress: Progress = print) -> dict:
    """``{benchmark name: records}`` of the benchmarks that run in one process, plus ``faults``: a
    ``BenchmarkFault`` of each that raised (the others still run)."""
    results: dict = {"faults": []}
    for benchmark in (b for b in selected(names) if not b.on_ranks):
        progress(f"benchmark {benchmark.name} (one process)")
        try:
            records = benchmark.run(settings)
        except Exception as exc:  # noqa: BLE001 - one benchmark's fault must not lose the others' records
            results["faults"].append(BenchmarkFault.of(benchmark.name, None, exc))
            progress(f"benchmark {benchmark.name} raised: {results['faults'][-1].error}")
            continue
        benchmark.check(records)
        results[benchmark.name] = records
    return results
