"""``python -m reference.layout``: tables and JSON for real models, clear errors for bad input."""

import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
import torch

from reference.layout import LayoutConfig, plan_layout
from reference.layout.catalog import model_specs
from reference.layout.cli import main

from tests.pytest_run import ROOT


def run_cli(capsys, *args) -> tuple[int, str, str]:
    """The command run in this process (the subprocess tests below run it as a user does): its exit code, what it
    printed and what it said on stderr; argparse's refusals exit through SystemExit."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    said = capsys.readouterr()
    return code, said.out, said.err


def test_notes_example_2_via_cli_json(capsys):
    assert main(["--numel", "40000000", "--dp", "64", "--policy", "high-busbw", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (bucket,) = out["buckets"]
    # 40,000,000 -> 611 * 65,536 = 40,042,496; shard 625,664 = 9 * 65,536 + 35,840.
    assert (bucket["numel"], bucket["shard"], bucket["shard_mod_2**16"]) == (40_042_496, 625_664, 35_840), bucket


def test_model_table_has_totals(capsys):
    code, out, err = run_cli(capsys, "--model", "llama2-7b", "--dp", "8", "--summary")
    assert code == 0, err
    assert "6,738,415,616" in out, out  # Llama-2 7B's parameter count


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


# Bad values of a typed argument (a count, a file, a factory) are refused by its type before any work, for every
# command: tests/test_commands.py. These are the checks that need the model or the other arguments.
@pytest.mark.parametrize("args, message", [
    (["--model", "mixtral-8x7b", "--dp", "16", "--ep", "3"], "--ep: got 3, but should be a divisor of --dp 16"),
    (["--model", "llama2-7b", "--dp", "16", "--ep", "2"], "ep: got 2 for llama2-7b, but should be 1 (it has no experts)"),
    (["--model", "gpt5"], "invalid choice: 'gpt5'"),
    (["--model", "llama2-7b", "--policy", "packed", "--fp8-param-gather", "mxfp8", "--summary"],
     "--fp8-param-gather: got mxfp8 with --policy packed, but should be given only with a distributed-optimizer "
     "policy (padded, high-busbw, shard-aligned)"),
])
def test_bad_input_is_named(args, message, capsys):
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and message in err, f"got {code}: {err!r}"


def test_planning_gpt3_at_dp_1024_allocates_no_tensor_storage(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the planner allocated a tensor, but should allocate nothing")

    specs = model_specs("gpt3-175b")
    for factory in ("empty", "zeros", "ones", "full", "tensor", "arange", "randn"):
        monkeypatch.setattr(torch, factory, refuse)
    layout = plan_layout(specs, LayoutConfig(dp=1024, policy="high-busbw", bucket_size=40_000_000))
    assert layout.buffers[0].numel >= 174_604_259_328


# -- any model: --config, --module, --set, and every policy side by side -------------------------------------

SMALL_LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 8,
               "num_key_value_heads": 2, "vocab_size": 1003, "intermediate_size": 688,
               "tie_word_embeddings": True}
FACTORIES = '''
import torch


def make():
    return torch.nn.Linear(1000, 1)


def boom():
    raise RuntimeError("no weights today")


def number():
    return 3


def frozen():
    return torch.nn.Linear(4, 4).requires_grad_(False)
'''


def needs_transformers():
    pytest.importorskip("transformers", reason="--config builds models with transformers, not installed")


def plan_json(capsys, *args):
    assert main([*args, "--json", "--summary"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def factories(tmp_path, monkeypatch):
    """A factory module in tmp_path, the current directory, under a name of its own (no cached import)."""
    name = f"factories_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(FACTORIES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return name


@pytest.mark.parametrize("form", ["file", "directory"])
def test_config_file_or_directory(tmp_path, capsys, form):
    """2,335,232 elements, 29 tensors (30 names less the tied lm_head.weight), counted with torch alone."""
    needs_transformers()
    (tmp_path / "config.json").write_text(json.dumps(SMALL_LLAMA))
    out = plan_json(capsys, "--config", str(tmp_path / "config.json" if form == "file" else tmp_path))
    assert out["totals"]["param_elements"] == 2_335_232
    assert out["read"] == {"tensors": 29, "frozen": 0, "experts": [],
                           "tied": {"model.embed_tokens.weight": ["lm_head.weight"]}}


def test_set_overrides_a_field_without_editing_the_file(tmp_path, capsys):
    """One layer: embedding 1003 x 256 = 256,768, a layer 692,736 (q, o 65,536 each, k, v 16,384 each,
    gate, up, down 176,128 each, two norms 256 each), the final norm 256: 949,760."""
    needs_transformers()
    (tmp_path / "config.json").write_text(json.dumps(SMALL_LLAMA))
    out = plan_json(capsys, "--config", str(tmp_path), "--set", "num_hidden_layers=1")
    assert out["totals"]["param_elements"] == 949_760


def run_in_a_users_directory(*args):
    """As a user runs it: a module of theirs (``mymod``) in the directory they run from."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "mymod.py").write_text(FACTORIES)
        return subprocess.run([sys.executable, "-m", "reference.layout", *args], cwd=tmp, capture_output=True,
                              text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_module_factory_in_the_current_directory():
    proc = run_in_a_users_directory("--module", "mymod:make", "--dp", "8", "--summary")
    assert proc.returncode == 0, proc.stderr
    assert "model=mymod:make dp=8" in proc.stdout and "| shard-aligned |" in proc.stdout, proc.stdout


POLICIES_BY_HAND = {"packed": (1_001, 0), "padded": (1_152, 151), "high-busbw": (65_536, 64_535),
                    "shard-aligned": (262_144, 261_143)}
"""Linear(1000, 1) at dp 4, one bucket (40M elements): weight 1,000 and bias 1, laid out in reverse.
packed: bias at 0, weight at 1, end 1,001: no padding. The others start the weight at 64 (end 1,064) and
round the bucket up to lcm(128, 4) = 128: 1,152 (padding 151); lcm(128, 65,536, 4) = 65,536 (64,535);
lcm(128, 4 x 65,536) = 262,144 (261,143). Percent of the 1,001 param elements."""


def check_policies(policies: dict):
    for policy, (numel, padding) in POLICIES_BY_HAND.items():
        assert policies[policy] == {"buckets": 1, "numel": numel, "padding": padding,
                                    "padding_pct": pytest.approx(100 * padding / 1_001)}, policy


def test_every_policy_side_by_side_worked_by_hand(capsys, factories):
    check_policies(plan_json(capsys, "--module", f"{factories}:make", "--dp", "4")["policies"])
    assert main(["--module", f"{factories}:make", "--dp", "4", "--summary", "--policy", "high-busbw"]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith("| high-busbw"))
    assert "*" in row and "65,536" in row and "64,535" in row and "6447.0529" in row, table  # 64,535 / 1,001


def test_the_policy_check_catches_a_table_that_repeats_the_chosen_policy(capsys, factories):
    policies = plan_json(capsys, "--module", f"{factories}:make", "--dp", "4")["policies"]
    with pytest.raises(AssertionError, match="packed"):
        check_policies({name: policies["padded"] for name in policies})


@pytest.mark.parametrize("args, message", [
    (["--config", "bad.json"], "--config: bad.json is not JSON"),
    (["--config", "list.json"], "holds a JSON list, but should hold an object"),
    (["--config", "notype.json"], "--config: notype.json has no model_type"),
    (["--config", "remote.json"], "auto_map {'AutoModelForCausalLM': 'modeling_x.X'}, so its model is "
                                  "remote code: refused"),
    (["--config", "unknown.json"], "model_type: got 'lamma' in unknown.json, but transformers"),
    (["--config", "llama.json", "--set", "num_layers=4"],
     "--set: got the key 'num_layers', but the config has no such field; close: num_hidden_layers"),
    (["--config", "llama.json", "--set", "num_hidden_layers"],
     "--set: got 'num_hidden_layers', but should be key=value"),
    (["--module", "nowhere:make"], "--module: cannot import the module 'nowhere'"),
    (["--module", "{f}:missing"],
     "--module: module '{f}' has no attribute 'missing' (its callables: boom, frozen, make, number)"),
    (["--module", "{f}:boom"], "--module: {f}:boom() raised RuntimeError: no weights today"),
    (["--module", "{f}:number"], "--module: {f}:number() returned an object of type builtins.int, but should "
                                 "return a torch.nn.Module"),
    (["--module", "{f}:frozen"], "model: {f}:frozen has no trainable parameter (2 frozen)"),
    (["--module", "{f}:make", "--dp", "4", "--ep", "2"],
     "ep: got 2, but should be 1 (the model has no experts)"),
])
def test_bad_model_input_is_one_line_naming_the_field(capsys, factories, args, message):
    if "--config" in args and "json" in args[1] and "missing" not in args[1] and "bad" not in args[1]:
        needs_transformers()
    files = {"bad.json": "{model_type: llama", "list.json": "[]", "notype.json": '{"hidden_size": 8}',
             "remote.json": json.dumps({"model_type": "x",
                                        "auto_map": {"AutoModelForCausalLM": "modeling_x.X"}}),
             "unknown.json": '{"model_type": "lamma"}', "llama.json": json.dumps(SMALL_LLAMA)}
    for name, text in files.items():
        Path(name).write_text(text)
    assert main([a.replace("{f}", factories) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message.replace("{f}", factories) in err, err


def test_a_raising_factory_shows_its_exception_not_our_traceback():
    proc = run_in_a_users_directory("--module", "mymod:boom")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "error: --module: mymod:boom() raised RuntimeError: no weights today\n"


def test_config_without_transformers_says_what_to_install(tmp_path, capsys, monkeypatch):
    (tmp_path / "config.json").write_text(json.dumps(SMALL_LLAMA))
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now fails
    assert main(["--config", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--config needs transformers" in err and "pip install transformers" in err, err


def test_set_without_config_is_refused(capsys):
    code, _, err = run_cli(capsys, "--numel", "10", "--set", "a=1")
    assert code == 2, err
    assert "--set: got 'a=1', but --set overrides fields of a --config only" in err


def test_the_catalogue_never_imports_transformers():
    """--model stays as quick as it was: transformers is imported only for --config."""
    code = ("import sys; from reference.layout.cli import main; main(['--model', 'llama2-7b', '--summary']); "
            "sys.exit('transformers' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"transformers was imported for --model: {proc.stderr}"
