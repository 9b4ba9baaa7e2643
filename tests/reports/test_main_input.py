"""The main job keeps every run and lets no bad input in: everything it can check is checked before it starts,
a run that cannot be written where asked is saved elsewhere, Ctrl-C ends in one line, and a killed job leaves
no suite running behind it."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ranks.capacity import max_ranks
from ranks.startup import TORCHRUN_ENV
from reports.nightly.job import parse_args, save
from reports.store.runs import Runs, load_results
from tests.processes import HAS_PROC, alive, children
from tests.pytest_run import ROOT
from tests.reports.builders import results

QUICK = 60  # seconds: every refusal comes before any rank starts


def job(*args: str, timeout: float = QUICK) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reports", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def refusal(args: list[str], capsys) -> str:
    """What the job says when it refuses ``args`` before any work (in this process: it refuses while parsing)."""
    with pytest.raises(SystemExit) as exited:
        parse_args(args)
    assert exited.value.code == 2, f"got exit {exited.value.code}, but a refusal should exit 2"
    return capsys.readouterr().err


@pytest.mark.parametrize("args, says", [
    (["--benchmark", "bogus"], "--benchmark: got bogus, but should be among busbw"),
    (["--impl", "bogus"], "--impl: got 'bogus', but should be one of reference"),
    (["--suite", "suites/nowhere"], "--suite: got 'suites/nowhere', which does not exist"),
    (["--world-size", "1000"], "--world-size: got 1000, but this machine holds at most"),
    (["--launches", "0"], "--launches: got '0', but should be a whole number of launches at least 1"),
    (["--out", "/proc/ddpc-runs"], "--out: got '/proc/ddpc-runs', but should be the runs' folder: /proc cannot be written"),
])
def test_bad_input_is_refused_in_one_line_before_any_work(args, says, tmp_path, capsys):
    err = refusal(args if "--out" in args else [*args, "--out", str(tmp_path / "runs")], capsys)
    assert says in err, err


def test_more_launches_under_torchrun_are_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """torchrun starts the ranks once: a second launch would run on the same ranks, so the job says so."""
    for name in TORCHRUN_ENV:
        monkeypatch.setenv(name, "1")
    err = refusal(["--launches", "3", "--out", str(tmp_path / "runs")], capsys)
    assert "--launches: got 3, but should be 1 under torchrun" in err, err
    assert parse_args(["--launches", "1", "--out", str(tmp_path / "runs")]).launches == 1


def test_the_job_refuses_before_it_starts_a_rank(tmp_path):
    """As a user runs it: an --out that is a file, one line, exit 2, nothing run."""
    (tmp_path / "runs").write_text("")
    start = time.monotonic()
    proc = job("--out", str(tmp_path / "runs"))
    assert proc.returncode == 2 and "--out: got" in proc.stderr and "not a file" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "[report" not in proc.stderr, "nothing ran before the refusal"
    assert time.monotonic() - start < QUICK


def test_the_world_size_bound_says_why_and_can_be_insisted_on():
    bound, why = max_ranks(cores=2, memory=24 * 2**30)
    assert (bound, why) == (16, "2 usable cores x 8 ranks a core"), "cores bind first on this machine's shape"
    assert max_ranks(cores=64, memory=8 * 2**30) == (16, "8.0 GiB available / 512 MiB a rank")
    from ranks.capacity import world_size_problem

    assert world_size_problem(1000, True, "--allow-world-size") is None, "insisting lifts the bound"


def test_a_run_that_cannot_be_written_where_asked_is_saved_elsewhere_and_named(tmp_path, monkeypatch, capsys):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    written = save(results("20260101T000000Z"), Runs(Path("/proc/ddpc-runs")))
    assert written.parent.parent == tmp_path and load_results(written).run.name == "20260101T000000Z"
    assert f"saving it into {written.parent} instead" in capsys.readouterr().err


def test_ctrl_c_ends_the_job_in_one_line_and_keeps_nothing_half_written(tmp_path):
    # Started as from a terminal: Ctrl-C at its default, even where this test inherited it ignored (a job
    # started with '&' by a shell without job control ignores it, and Python then installs no handler).
    proc = subprocess.Popen([sys.executable, "-m", "reports", "--smoke", "--no-suites", "--impl", "reference",
                             "--out", str(tmp_path)], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = proc.stderr.readline()  # the job has started its ranks
    assert first.startswith("[report"), first
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("interrupted: stopped before"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "no run, no reservation, no temporary folder"


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to find the child")
def test_a_killed_job_leaves_no_suite_running(tmp_path):
    """A check that is quiet for a minute: only the parent's death can end its pytest sooner."""
    (tmp_path / "test_quiet.py").write_text("import time\n\n\ndef test_quiet():\n    time.sleep(60)\n")
    script = ("from reports.conformance.suites import run_suite\n"
              f"run_suite({str(tmp_path / 'test_quiet.py')!r}, 'reference', ['-p', 'suites.plugin'])\n")
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    deadline = time.monotonic() + 60
    while not children(parent.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    [suite] = children(parent.pid)
    while "test_quiet" not in Path(f"/proc/{suite}/cmdline").read_text() and time.monotonic() < deadline:
        time.sleep(0.1)  # the child has become the suite's pytest
    time.sleep(2)
    assert alive(suite), "the suite should be running (quietly) when the job is killed"
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while alive(suite) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(suite), "the suite's pytest outlived the job that started it"
