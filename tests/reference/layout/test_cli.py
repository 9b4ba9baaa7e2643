"""``python -m reference.layout``: tables and JSON for real models, clear errors for bad input."""

import json
import subprocess
import sys

import pytest
import torch

from reference.layout import LayoutConfig, plan_layout
from reference.layout.catalog import model_specs
from reference.layout.cli import main

from tests.pytest_run import ROOT


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "reference.layout", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_notes_example_2_via_cli_json(capsys):
    assert main(["--numel", "40000000", "--dp", "64", "--policy", "high-busbw", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (bucket,) = out["buckets"]
    # 40,000,000 -> 611 * 65,536 = 40,042,496; shard 625,664 = 9 * 65,536 + 35,840.
    assert (bucket["numel"], bucket["shard"], bucket["shard_mod_2**16"]) == (40_042_496, 625_664, 35_840), bucket


def test_model_table_has_totals():
    proc = run_cli("--model", "llama2-7b", "--dp", "8", "--summary")
    assert proc.returncode == 0, proc.stderr
    assert "6,738,415,616" in proc.stdout, proc.stdout  # Llama-2 7B's parameter count


def test_mixture_of_experts_gets_expert_buffers_planned_for_dp_over_ep(capsys):
    """Mixtral 8x7B at dp=32, ep=8: one expert per layer on each rank, buffers for expert_dp = 4.

    Worked by hand: an expert's fc1 is 2 * 14,336 x 4,096 = 117,440,512 elements and its fc2
    4,096 x 14,336 = 58,720,256, each over the 40M bucket size, so each closes its own bucket:
    64 expert buckets. Both are multiples of 4 * 2**16 = 262,144 (448 and 224 times), so even
    shard-aligned needs no expert padding.
    """
    assert main(["--model", "mixtral-8x7b", "--dp", "32", "--ep", "8", "--policy", "shard-aligned",
                 "--bucket-size", "40000000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    experts = [b for b in out["buckets"] if b["kind"] == "expert"]
    assert len(experts) == 64, len(experts)
    assert {(b["numel"], b["end_padding"], b["params"]) for b in experts} == {
        (117_440_512, 0, 1), (58_720_256, 0, 1)}, experts[:2]
    assert out["totals"]["expert_buffers"] == 1, out["totals"]


@pytest.mark.parametrize("args, message", [
    (["--numel", "0"], "--numel: got 0, but should be >= 1"),
    (["--model", "mixtral-8x7b", "--dp", "16", "--ep", "3"], "--ep: got 3, but should be a divisor of --dp 16"),
    (["--model", "llama2-7b", "--dp", "16", "--ep", "2"], "ep: got 2 for llama2-7b, but should be 1 (it has no experts)"),
    (["--numel", "10", "--dp", "0"], "dp: got 0, but should be an integer >= 1"),
    (["--model", "gpt5"], "invalid choice: 'gpt5'"),
])
def test_bad_input_is_named(args, message):
    proc = run_cli(*args)
    assert proc.returncode == 2 and message in proc.stderr, f"got {proc.returncode}: {proc.stderr!r}"


def test_planning_gpt3_at_dp_1024_allocates_no_tensor_storage(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the planner allocated a tensor, but should allocate nothing")

    specs = model_specs("gpt3-175b")
    for factory in ("empty", "zeros", "ones", "full", "tensor", "arange", "randn"):
        monkeypatch.setattr(torch, factory, refuse)
    layout = plan_layout(specs, LayoutConfig(dp=1024, policy="high-busbw", bucket_size=40_000_000))
    assert layout.buffers[0].numel >= 174_604_259_328
