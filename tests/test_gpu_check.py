"""The one-command GPU check: what it would run on a node, and its first steps, which run anywhere."""

import json
import subprocess
import sys
from pathlib import Path

from reports.gpu_check import Step, plan, summary_markdown, world_sizes

from .pytest_run import ROOT


def names(steps) -> list[str]:
    return [s.name for s in steps]


def test_the_steps_follow_the_gpus_the_node_has():
    assert world_sizes(0) == [] and world_sizes(1) == [1] and world_sizes(8) == [1, 8]
    one = plan(Path("/out"), 1)
    assert names(one) == ["environment", "hardware", "layout", "multigpu-ws1", "report-ws1"]
    assert "--device" in one[2].command and "cuda" in one[2].command, "buffers on CUDA tensors"
    eight = plan(Path("/out"), 8)
    assert names(eight)[-3:] == ["multigpu-ws8", "report-ws1", "report-all-gpus"]
    assert "--nproc-per-node=8" in eight[-1].command
    assert sum(s.limit_s for s in one) <= 20 * 60, "each step is bounded"


def test_environment_and_hardware_run_anywhere_and_are_summarized(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "reports.gpu_check", "--out", str(tmp_path),
                           "--steps", "environment,hardware"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    env = json.loads((tmp_path / "environment.json").read_text())
    assert env["python"] and env["torch"] and "missing" in env
    assert json.loads((tmp_path / "hardware.json").read_text())["host"]["logical_cores"]
    summary = (tmp_path / "gpu_check.md").read_text()
    assert "**every step passed**" in summary and f"torch {env['torch']}" in summary, summary


def test_without_a_gpu_the_whole_check_says_so(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "reports.gpu_check", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "No CUDA device here" in proc.stderr, proc.stderr


def test_a_failed_or_stopped_step_is_named_in_the_summary():
    steps = [Step("layout", ["x"], 1, "layout", exit_code=0, seconds=3, found="154 passed in 3.0s"),
             Step("report-ws1", ["x"], 1, "report", exit_code=124, seconds=1, found="stopped")]
    text = summary_markdown(steps, 4)
    assert "**1 did not pass: report-ws1**" in text and "154 passed" in text
