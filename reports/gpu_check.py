"""The first run on a GPU node, in one command: ``python -m reports.gpu_check --out DIR``.

Everything the project has that only a GPU can show, each step a child
process with its own time limit, its output kept in ``DIR/<step>.log``, and
one summary, ``DIR/gpu_check.md``, that says what ran, what passed and what
was found:

1. ``environment``: Python, torch, CUDA, NCCL, the GPUs, and which optional
   packages are missing here (ruptures, megatron-core: the check goes on without
   them);
2. ``hardware``: the hardware report with real NVML (``hardware.json``);
3. ``layout``: the layout suite with its buffer, view and shard checks on
   CUDA tensors (``--device cuda``);
4. ``multigpu-wsN``: the multi-rank suite at every world size the node's GPUs
   allow on NCCL (1, and the GPU count when there are several);
5. ``multigpu-wsN-gloo-cuda``: more ranks than GPUs, sharing them over gloo
   with CUDA tensors (``--device cuda``), which NCCL refuses: the whole suite
   at one rank more than the GPUs, the comparison with torch DDP at two more.
   It reaches what world size 1 cannot: buffers, ``main_grad`` views,
   asynchronous work, streams and the distributed optimizer on CUDA against
   torch DDP on CUDA;
6. ``report-ws1``: the main job at world size 1 on NCCL (busbw sweep, the
   emulated overlap with compute on the CUDA stream, step time, every
   benchmark), written under ``DIR/runs``; figures with nothing to measure at
   one rank (overlap, bucketing, busbw) are null with the reason;
7. ``report-wsN-gloo-cuda``: the main job over gloo with CUDA tensors at one
   rank more than the GPUs: overlap with stream-occupying compute and real
   communication, a setup of its own in the runs directory;
8. ``report-all-gpus``: with several GPUs, the bus-bandwidth sweep and the
   overlap again under torchrun, one rank per GPU.

A step that fails or runs out of time is recorded and the next one runs. The
summary groups each step's failures by cause (``reports.failure_causes``):
one line per exception and the place it was raised, with its count. The
step limits add up to 10 minutes on a one-GPU node, one call of a lent
machine. It runs on any torch the node has (the project's tests pin 2.13; a
GPU image may have another) and on Python 3.12.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from cli import Arg, OutFolder, Parser
from datamodel import doc, from_json, to_json
from ranks.startup import outside_torchrun

from .failure_causes import Cause, cause_of, causes_in_junit, causes_markdown
from .render.table import table
from .store.runs import RunError, Runs

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL = ("ruptures", "megatron.core", "deepspeed", "pynvml", "hypothesis", "pytest_benchmark")
IMPLS = ("reference", "torch", "fsdp2", "megatron")


@dataclass
class CheckStep:
    name: str
    command: list[str]
    limit_s: float
    what: str
    junit: Path | None = None
    """Where a pytest step writes its JUnit XML, whose failures the summary groups by cause."""
    runs: Path | None = None
    """Where a report step stores its run, whose verdict the summary states."""
    exit_code: int | None = None
    seconds: float = 0.0
    found: str = ""
    causes: Counter[Cause] = field(default_factory=Counter)
    outputs: list[str] = field(default_factory=list)


def world_sizes(gpus: int) -> list[int]:
    """The NCCL world sizes one node allows: one rank per GPU, so 1 and, with several GPUs, all of them."""
    return sorted({1, gpus}) if gpus > 0 else []


def shared_world_sizes(gpus: int) -> list[int]:
    """World sizes past the GPU count, whose ranks share the GPUs over gloo: one and two more than the GPUs."""
    return [gpus + 1, gpus + 2] if gpus > 0 else []


def _pytest(python: str, out: Path, name: str, limit_s: float, what: str, *args: str) -> CheckStep:
    """A step that runs pytest with ``args`` and keeps its JUnit XML as ``<name>.xml``."""
    junit = out / f"{name}.xml"
    return CheckStep(name, [python, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
                limit_s, what, junit=junit)


def plan(out: Path, gpus: int, python: str = sys.executable) -> list[CheckStep]:
    """The steps for a node with ``gpus`` GPUs, in order, each with its time limit (seconds)."""
    steps = [
        CheckStep("environment", [python, "-m", "reports.gpu_check", "--environment"], 20,
             "Python, torch, CUDA, NCCL, GPUs, missing optional packages"),
        CheckStep("hardware", [python, "-m", "hardware"], 20, "NVML: devices, links, P2P, topology"),
        _pytest(python, out, "layout", 70, "the layout suite, buffers and views on CUDA tensors",
                "suites/layout", "--device", "cuda", "--hypothesis-profile=ci"),
    ]
    for ws in world_sizes(gpus):
        steps.append(_pytest(python, out, f"multigpu-ws{ws}", 70 if ws == 1 else 150,
                             f"the multi-rank suite at world size {ws} (NCCL, a GPU per rank)",
                             "suites/multigpu", "--world-size", str(ws)))
    whole, versus = shared_world_sizes(gpus) or [None, None]
    if whole:
        steps.append(_pytest(python, out, f"multigpu-ws{whole}-gloo-cuda", 150,
                             f"the multi-rank suite at world size {whole}, ranks sharing the GPUs over gloo with "
                             "CUDA tensors", "suites/multigpu", "--world-size", str(whole), "--device", "cuda"))
        steps.append(_pytest(python, out, f"multigpu-ws{versus}-gloo-cuda", 50,
                             f"the reference against torch DDP on CUDA at world size {versus}, over gloo",
                             "suites/multigpu/test_vs_torch_ddp.py", "--world-size", str(versus), "--device", "cuda"))
    impls = [arg for impl in IMPLS for arg in ("--impl", impl)]
    steps.append(CheckStep("report-ws1", [python, "-m", "reports", "--world-size", "1", "--no-suites", "--no-strength",
                                     "--rounds", "10", *impls, "--out", str(out / "runs")], 100,
                      "the main job at world size 1 on NCCL: busbw sweep, overlap with stream compute, step time",
                      runs=out / "runs"))
    if whole:
        steps.append(CheckStep(f"report-ws{whole}-gloo-cuda",
                          [python, "-m", "reports", "--world-size", str(whole), "--device", "cuda", "--no-suites",
                           "--no-strength", "--rounds", "10", *impls, "--out", str(out / "runs")], 120,
                          f"the main job at world size {whole} over gloo with CUDA tensors: overlap with stream "
                          "compute and real communication", runs=out / "runs"))
    if gpus > 1:
        steps.append(CheckStep("report-all-gpus", [python, "-m", "torch.distributed.run", "--standalone",
                                              f"--nproc-per-node={gpus}", "-m", "reports", "--no-suites",
                                              "--no-strength", "--benchmark", "busbw", "--benchmark", "overlap",
                                              *impls, "--out", str(out / "runs")], 300,
                          f"busbw and overlap on all {gpus} GPUs under torchrun", runs=out / "runs"))
    return steps


@dataclass(frozen=True)
class Environment:
    """What a node runs: versions, GPUs, and the optional packages it lacks."""

    python: str = doc("Python's version")
    torch: str = doc("torch's version")
    cuda_build: str | None = doc("the CUDA torch was built with; null for a CPU build")
    cuda_available: bool = doc("whether CUDA works here")
    gpus: int = doc("CUDA devices torch sees")
    gpu_names: tuple[str, ...] = doc("their names")
    nccl: str | None = doc("NCCL's version; null without CUDA")
    missing: tuple[str, ...] = doc("optional packages not installed")


def environment() -> Environment:
    import torch

    cuda = torch.cuda.is_available()
    return Environment(python=platform.python_version(), torch=torch.__version__, cuda_build=torch.version.cuda,
                       cuda_available=cuda, gpus=torch.cuda.device_count(),
                       gpu_names=tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())),
                       nccl=".".join(str(v) for v in torch.cuda.nccl.version()[:3]) if cuda else None,
                       missing=tuple(m for m in OPTIONAL if _missing(m)))


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:  # its parent package is missing
        return True


def run_step(step: CheckStep, out: Path) -> CheckStep:
    """Run one step in a child process with a clean launcher environment; its output goes to ``<name>.log``."""
    log = out / f"{step.name}.log"
    runs_before = frozenset(Runs(step.runs).names()) if step.runs is not None else frozenset()
    start = time.monotonic()
    try:
        proc = subprocess.run(step.command, cwd=ROOT, capture_output=True, text=True, timeout=step.limit_s,
                              env=outside_torchrun())
        step.exit_code, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        step.exit_code = 124
        text = f"{_text(exc.stdout)}{_text(exc.stderr)}\n[gpu_check] stopped after {step.limit_s:g} s"
    step.seconds = time.monotonic() - start
    log.write_text(text)
    step.outputs.append(log.name)
    step.found = findings(step, text, out, runs_before)
    if step.junit is not None and step.junit.exists():
        step.causes = causes_in_junit(step.junit)
    if step.exit_code != 0 and not step.causes:
        step.causes = Counter({cause_of(text): 1})
    return step


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def findings(step: CheckStep, text: str, out: Path, runs_before: frozenset[str] = frozenset()) -> str:
    """One line of what the step found, from what it wrote: pytest's JUnit counts, the verdict of the run a report
    step stored, the JSON; the output's last line only when it wrote none of them."""
    if step.name == "environment":
        (out / "environment.json").write_text(text)
        return _environment_line(text)
    if step.name == "hardware":
        (out / "hardware.json").write_text(text)
        return "hardware.json written" if step.exit_code == 0 else "failed"
    if step.junit is not None and step.junit.exists():
        return junit_tally(step.junit)
    if step.runs is not None:
        written = [name for name in Runs(step.runs).names() if name not in runs_before]
        if written:
            return _run_line(Runs(step.runs), written[-1])
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


def junit_tally(path: Path) -> str:
    """'3 failed, 150 passed, 1 skipped, 0 errors' from a JUnit XML file's test suites."""
    suites = list(ET.parse(path).getroot().iter("testsuite"))
    tests, failed, errors, skipped = (sum(int(suite.get(key, 0)) for suite in suites)
                                      for key in ("tests", "failures", "errors", "skipped"))
    return f"{failed} failed, {tests - failed - errors - skipped} passed, {skipped} skipped, {errors} errors"


def _run_line(runs: Runs, name: str) -> str:
    try:
        verdict = runs.load(name).verdict
    except RunError as exc:
        return f"run {name} unreadable: {exc}"
    if verdict is None:
        return f"run {name}: no verdict stored"
    failing = [line for line in verdict.lines if line.fails]
    return f"run {name}: {verdict.word}, {len(verdict.lines)} lines checked, {len(failing)} failing"


def _environment_line(text: str) -> str:
    try:
        env = from_json(Environment, json.loads(text))
    except ValueError:
        return "could not describe the environment"
    return (f"Python {env.python}, torch {env.torch} (CUDA {env.cuda_build}), NCCL {env.nccl}, "
            f"{env.gpus} GPU(s) {', '.join(env.gpu_names)}; missing: {', '.join(env.missing) or 'none'}")


def summary_markdown(steps: Sequence[CheckStep], total_s: float) -> str:
    rows = [{"step": s.name, "what": s.what, "exit": s.exit_code, "seconds": f"{s.seconds:.0f}", "found": s.found}
            for s in steps]
    failed = [s.name for s in steps if s.exit_code != 0]
    causes = [f"### {s.name}: {sum(s.causes.values())} failure(s), {len(s.causes)} cause(s)\n\n"
              + causes_markdown(s.causes) for s in steps if s.causes]
    return (f"# GPU check\n\n{len(steps)} steps in {total_s:.0f} s; "
            + (f"**{len(failed)} did not pass: {', '.join(failed)}**" if failed else "**every step passed**")
            + ". Each step's output is in `<step>.log`; the report runs are under `runs/`.\n\n"
            + table(rows, numparse=False) + "\n"
            + ("\n## Failures by cause\n\n" + "\n\n".join(causes) + "\n" if causes else ""))


class StepNames(Arg):
    """Comma-separated names of the check's steps."""

    kind = "names"

    def __call__(self, text: str) -> list[str]:
        """The names; which are steps depends on the node's GPU count (``main`` checks them against its plan)."""
        wanted = [name for name in text.split(",") if name]
        if not wanted:
            self.refuse(text, "comma-separated step names, such as environment,hardware")
        return wanted


def parser() -> Parser:
    p = Parser(prog="python -m reports.gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=OutFolder("the check's folder"),
                   help="directory for the summary, the logs and the runs")
    p.add_argument("--steps", type=StepNames(), help="comma-separated step names to run (default: every step)")
    p.add_argument("--environment", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser_ = parser()
    args = parser_.parse_args(argv)
    if args.environment:
        print(json.dumps(to_json(environment())))
        return 0
    if args.out is None:
        parser_.error("--out: got nothing, but should be a directory for the check's files")
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    steps = plan(args.out.resolve(), gpus)
    if args.steps:
        unknown = [name for name in args.steps if name not in {s.name for s in steps}]
        if unknown:
            parser_.error(f"--steps: got {', '.join(unknown)}, but a node with {gpus} GPU(s) has the steps "
                          f"{', '.join(s.name for s in steps)}")
        steps = [s for s in steps if s.name in args.steps]
    elif gpus == 0:
        print("No CUDA device here: the GPU check runs on a GPU node (use --steps environment,hardware to "
              "try its first steps anyway).", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    for step in steps:
        print(f"[gpu_check] {step.name}: {step.what}", file=sys.stderr, flush=True)
        run_step(step, args.out)
        print(f"[gpu_check]   exit {step.exit_code} in {step.seconds:.0f} s: {step.found}", file=sys.stderr, flush=True)
    text = summary_markdown(steps, time.monotonic() - start)
    (args.out / "gpu_check.md").write_text(text)
    print(text)
    return 0 if all(s.exit_code == 0 for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
