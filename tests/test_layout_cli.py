"""``python -m reference.layout``: tables and JSON for real models, clear errors for bad input."""

import json
import subprocess
import sys

import pytest
import torch

from reference.layout import LayoutConfig, plan_layout
from reference.layout.catalog import model_specs
from reference.layout.cli import main

from .pytest_run import ROOT


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "reference.layout", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_seed_example_2_via_cli_json(capsys):
    assert main(["--numel", "40000000", "--dp", "64", "--policy", "high-busbw", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (bucket,) = out["buckets"]
    # 40,000,000 -> 611 * 65,536 = 40,042,496; shard 625,664 = 9 * 65,536 + 35,840.
    assert (bucket["numel"], bucket["shard"], bucket["shard_mod_2**16"]) == (40_042_496, 625_664, 35_840), bucket


def test_model_table_has_totals():
    proc = run_cli("--model", "llama2-7b", "--dp", "8", "--summary")
    assert proc.returncode == 0, proc.stderr
    assert "6,738,415,616" in proc.stdout, proc.stdout  # Llama-2 7B's parameter count


@pytest.mark.parametrize("args, message", [
    (["--numel", "0"], "--numel: got 0, but should be >= 1"),
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
