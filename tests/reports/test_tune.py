"""``python -m reports.tune``: a recommendation with its evidence for a model of the user's, as JSON or
tables, from a real run's curve; clear one-line errors for bad input, before any rank starts."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.tuner.tune import TuneReport
from datamodel import from_json
from reports.tune import main
from tests.pytest_run import ROOT

OLD_RUN = ROOT / "fixtures/runs/20261125T134518Z"  # schema 2: its benchmark records are left out on reading
TINY_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
              "tie_word_embeddings": False}


@pytest.fixture(scope="module")
def busbw_run(smoke_run) -> Path:
    """A runs root whose latest run is a real smoke run (the session's: its bus-bandwidth sweep on tiny sizes)."""
    return smoke_run.parent


def tune(*args):
    return subprocess.run([sys.executable, "-m", "reports.tune", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_a_module_factory_tuned_from_a_runs_curve_as_json(busbw_run):
    proc = tune("--module", "fixtures.examples.tiny_model:make", "--dp", "4", "--compute-ms", "20",
                "--from-run", str(busbw_run), "--grid-start", "16384", "--smoke", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    report = from_json(TuneReport, data)  # what it writes is the typed report, read back by the codec
    sizes = [p.bucket_size for p in report.predictions]
    assert sizes[:4] == [16_384, 32_768, 65_536, 131_072] and sizes[-1] is None, sizes
    assert report.recommendation.bucket_size in report.recommendation.within, report.recommendation
    for p in report.predictions:  # the definitions hold for every candidate
        assert p.exposed_ms == pytest.approx(p.step_ms - p.compute_ms), p
        assert p.exposed_ms == pytest.approx(p.launch_ms + p.slowed_ms + p.unhidden_ms, abs=1e-9), p
        assert p.compute_ms == pytest.approx(20.0), p
    assert report.curve.source.startswith("run "), report.curve
    assert report.curve.collective == "reduce_scatter", report.curve
    assert report.curve.world_size == 2 and "from world size 2 to 4" in report.curve.assumption, report.curve
    assert report.compute_method.startswith("given total of 20 ms"), report.compute_method
    assert report.launch_ms >= 0 and "launch cost: the backward of a" in report.launch_method
    checks = report.verification.verification.checks
    assert {c.role for c in checks} <= {"recommended", "far smaller", "far larger"} and checks, checks
    assert report.smoke and not report.verified, "a smoke run verifies nothing"
    progress = proc.stderr
    assert "[bucket size] verification (" in progress and "round 1, about" in progress, progress[-2000:]
    assert "predicted 7 of 7 sizes" in progress, progress[-2000:]


def test_a_config_tuned_as_tables_says_what_it_rests_on(busbw_run, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY_LLAMA))
    proc = tune("--config", str(config), "--dp", "8", "--compute-ms", "5", "--from-run",
                str(busbw_run / "latest"), "--grid-start", "8192", "--smoke")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    for words in ("SMOKE: tiny inputs", "Curve: reduce_scatter, in-place, buckets padded as padded, from run",
                  "Assumed: converted from world size 2 to 8", "Compute: given total of 5 ms",
                  "| bucket size, elements", "torch DDP's 25 MiB", "Recommended: ",
                  "(UNVERIFIED: ", "a smoke run (one round on tiny inputs) verifies nothing", "| role ",
                  "predicted step (ms)"):
        assert words in out, f"{words!r}: got missing, but should be in the output:\n{out}"


def test_a_model_without_linear_layers_is_timed_at_a_measured_flop_rate(busbw_run):
    """A --numel buffer is one flat param: no layer shape to time, so its FLOPs go at a rate measured here."""
    proc = tune("--numel", "300000", "--dp", "4", "--from-run", str(busbw_run), "--grid-start", "65536", "--smoke",
                "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = from_json(TuneReport, json.loads(proc.stdout))
    assert report.compute_method.startswith("FLOP count at a measured rate of "), report.compute_method
    assert report.compute_ms > 0, report
    assert "the model has no linear layer to time" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("args, words", [  # each argument's own bad values: tests/test_commands.py
    (["--model", "llama2-7b", "--dp", "8", "--set", "a=1"],
     "--set: got 'a=1', but --set overrides fields of a --config only"),
])
def test_arguments_that_do_not_go_together_are_refused_naming_the_field(args, words, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert words in capsys.readouterr().err


@pytest.mark.parametrize("args, words", [
    (["--module", "no_such_module:make", "--dp", "8"],
     "error: --module: cannot import the module 'no_such_module'"),
    (["--model", "llama2-7b", "--dp", "8", "--from-run", str(OLD_RUN)],
     "has no in-place reduce_scatter records padded padded"),
    (["--model", "llama2-7b", "--dp", "8", "--policy", "packed", "--from-run", str(OLD_RUN)],
     "has no in-place all_reduce records padded unpadded"),
])
def test_bad_input_is_one_line_before_any_rank_starts(args, words, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1, err
    assert "measuring on" not in err, "the error should come before any measurement"
