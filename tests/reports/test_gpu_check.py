"""The one-command GPU check: what it would run on a node, and its first steps, which run anywhere."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from datamodel import to_json
from reports.failure_causes import Cause, cause_of, causes_in_junit
from reports.gpu_check import CheckStep, findings, plan, shared_world_sizes, summary_markdown, world_sizes
from reports.store.model import Verdict, VerdictLine
from reports.store.runs import Runs, dump_json
from tests.pytest_run import ROOT
from tests.reports.builders import results


def names(steps) -> list[str]:
    return [s.name for s in steps]


def test_the_steps_follow_the_gpus_the_node_has():
    assert world_sizes(0) == [] and world_sizes(1) == [1] and world_sizes(8) == [1, 8]
    assert shared_world_sizes(0) == [] and shared_world_sizes(1) == [2, 3] and shared_world_sizes(8) == [9, 10]
    one = plan(Path("/out"), 1)
    assert names(one) == ["environment", "hardware", "layout", "multigpu-ws1", "multigpu-ws2-gloo-cuda",
                          "multigpu-ws3-gloo-cuda", "report-ws1", "report-ws2-gloo-cuda"]
    assert "--device" in one[2].command and "cuda" in one[2].command, "buffers on CUDA tensors"
    for step in (one[4], one[5], one[7]):
        assert step.command[step.command.index("--device") + 1] == "cuda", f"{step.name}: ranks on CUDA tensors"
    eight = plan(Path("/out"), 8)
    assert names(eight)[-3:] == ["report-ws1", "report-ws9-gloo-cuda", "report-all-gpus"]
    assert "--nproc-per-node=8" in eight[-1].command
    assert sum(s.limit_s for s in one) <= 10 * 60, "a one-GPU node's check fits one 10-minute call"


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


def test_step_names_are_those_of_the_nodes_own_plan(tmp_path, monkeypatch, capsys):
    """A one-GPU node's steps are named for its own GPU count (multigpu-ws2-gloo-cuda), not an eight-GPU node's."""
    import torch

    from reports import gpu_check

    ran = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(gpu_check, "run_step", lambda step, out: ran.append(step.name) or step)
    monkeypatch.setattr(gpu_check, "summary_markdown", lambda steps, seconds: "")
    gpu_check.main(["--out", str(tmp_path), "--steps", "multigpu-ws2-gloo-cuda,report-ws1"])
    assert ran == ["multigpu-ws2-gloo-cuda", "report-ws1"], f"got {ran}, but should run the two steps asked for"
    with pytest.raises(SystemExit) as exit_:
        gpu_check.main(["--out", str(tmp_path / "again"), "--steps", "multigpu-ws9-gloo-cuda"])
    assert exit_.value.code == 2
    message = capsys.readouterr().err
    assert "got multigpu-ws9-gloo-cuda, but a node with 1 GPU(s) has the steps environment, " in message, message
    assert ran == ["multigpu-ws2-gloo-cuda", "report-ws1"] and not (tmp_path / "again").exists(), "refused first"


def test_a_failed_or_stopped_step_is_named_in_the_summary():
    steps = [CheckStep("layout", ["x"], 1, "layout", exit_code=0, seconds=3, found="154 passed in 3.0s"),
             CheckStep("report-ws1", ["x"], 1, "report", exit_code=124, seconds=1, found="stopped")]
    text = summary_markdown(steps, 4)
    assert "**1 did not pass: report-ws1**" in text and "154 passed" in text


# What pytest wrote for a check that failed on the ranks on a GPU node (shortened), and an assertion failure.
RANK_FAILURE = """suites.multigpu.test_communication.check_each_element failed on rank 0 of world size 1
---------- rank 0 ----------
Traceback (most recent call last):
  File "/w/ranks/recording.py", line 246, in _made_over
    made = dist.new_group(ranks, backend=BACKEND, use_local_synchronization=True)
  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 2251, in _new_process_group_helper
    if device_id and pg._get_backend(device_id).supports_splitting:
RuntimeError: No backend type associated with device type cuda"""
ASSERTION = """suites/layout/test_order.py:30: in test_reverse_order
    assert got == want, f"got {got}, but should be {want}"
E   AssertionError: got [1, 0], but should be [0, 1]"""


def _junit(path: Path, failures: list[str]) -> Path:
    cases = "".join(f'<testcase classname="c" name="t{i}"><failure message="m">{text}</failure></testcase>'
                    for i, text in enumerate(failures))
    path.write_text(f'<testsuites><testsuite name="pytest">{cases}<testcase classname="c" name="ok"/>'
                    "</testsuite></testsuites>")
    return path


def test_failures_from_one_exception_read_as_one_cause_with_its_count(tmp_path):
    from xml.sax.saxutils import escape

    counts = causes_in_junit(_junit(tmp_path / "x.xml", [escape(RANK_FAILURE)] * 174 + [escape(ASSERTION)]))
    backend = Cause("RuntimeError: No backend type associated with device type cuda",
                    "torch/distributed/distributed_c10d.py:2251 in _new_process_group_helper")
    assert counts == Counter({backend: 174, Cause("AssertionError: got [1, 0], but should be [0, 1]",
                                                  "suites/layout/test_order.py:30"): 1}), counts
    step = CheckStep("multigpu-ws1", ["x"], 1, "suite", exit_code=1, found="174 failed", causes=counts)
    text = summary_markdown([step], 1)
    assert ("- 174 x `RuntimeError: No backend type associated with device type cuda` (raised at "
            "`torch/distributed/distributed_c10d.py:2251 in _new_process_group_helper`)") in text, text
    assert text.count("No backend type") == 1, "one line for the 174, not 174 lines"


def test_a_crash_outside_pytest_is_its_last_exception():
    log = "[report] benchmarks on 1 ranks\n" + RANK_FAILURE.split("---------- rank 0 ----------\n")[1]
    assert cause_of(log).exception == "RuntimeError: No backend type associated with device type cuda"
    assert cause_of("no traceback at all\n").exception == "no traceback at all"


def test_a_pytest_step_is_summarized_from_its_junit_counts_not_its_words(tmp_path):
    junit = tmp_path / "layout.xml"
    junit.write_text('<testsuites><testsuite name="pytest" tests="10" failures="2" errors="1" skipped="3">'
                     "</testsuite></testsuites>")
    step = CheckStep("layout", ["x"], 1, "layout", junit=junit, exit_code=1)
    assert findings(step, "= 99 passed in 1.0s =\n", tmp_path) == "2 failed, 4 passed, 3 skipped, 1 errors"


def test_a_report_step_is_summarized_from_the_verdict_of_the_run_it_stored(tmp_path):
    runs = Runs(tmp_path / "runs")
    runs.write("20260101T000000Z", {"results.json": "{}"})
    before = frozenset(runs.names())
    verdict = Verdict(lines=(VerdictLine("conformance", "pass", "a"), VerdictLine("gate", "fail", "b")),
                      fail_on_regression=True)
    stored = results("20260102T000000Z", verdict=verdict)
    runs.write(stored.run.name, {"results.json": dump_json(to_json(stored))})
    step = CheckStep("report-ws1", ["x"], 1, "report", runs=tmp_path / "runs", exit_code=0)
    found = findings(step, "**Verdict: PASS** (words that say otherwise)\n", tmp_path, before)
    assert found == "run 20260102T000000Z: FAIL, 2 lines checked, 1 failing", found
