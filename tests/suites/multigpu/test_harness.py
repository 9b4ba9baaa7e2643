"""The multigpu harness from outside: both launch modes, and checks that fail, skip, die or hang on one rank.

Each mode runs pytest once in a child process, on the suite's harness tests
followed by the deliberately broken checks in tests/fakes/multirank_cases.py;
the tests here read the outcomes back from the child's junit xml.
"""

import contextlib
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

import pytest

import torch
import torch.distributed as dist

from ranks import joining
from ranks.address import address_of
from ranks.joining import BackendMismatch, agree_on_backend, keep_off_gpus, pick_backend
from ranks.startup import launched_by_torchrun
from reports.conformance.suites import child_environment
from ranks.outcome import Outcome, RankCrashWarning, settle
from ranks.pool import PoolError, WorkerPool
from ranks.startup import Settings
from suites.junit import CRASH_RERUN
from suites.multigpu.harness.fixture import Ranks
from suites.multigpu.harness.options import settings_from

from tests.pytest_run import ROOT, run_pytest

PLUGIN = ("-p", "suites.multigpu.harness.plugin")
HARNESS_TESTS = "suites/multigpu/test_harness.py"
HARNESS_TEST_NAMES = (
    "test_all_reduce_of_rank_ids_is_their_sum",
    "test_run_returns_each_ranks_value_in_rank_order",
    "test_ring_exchange_needs_peers",
    "test_control_group_is_separate_and_options_reach_every_rank",
)
FAKES = "tests/fakes/multirank_cases.py"
# Short enough to keep this module quick, long enough for a healthy collective on a busy 2-core machine.
PG_TIMEOUT, RANK_TIMEOUT = 1.5, 4.0
TIMEOUTS = ("--pg-timeout", str(PG_TIMEOUT), "--rank-timeout", str(RANK_TIMEOUT))


class Result(NamedTuple):
    outcome: str
    message: str
    seconds: float
    properties: tuple[tuple[str, str], ...] = ()


def run_torchrun(*args: str, nproc: int = 2) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={nproc}",
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-rs",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def junit_results(path: Path) -> dict[str, Result]:
    results = {}
    for case in ET.parse(path).iter("testcase"):
        found = [e for e in case if e.tag in ("failure", "error", "skipped")]
        outcome = found[0].tag if found else "passed"
        message = "\n".join(f"{e.get('message', '')}\n{e.text or ''}" for e in found)
        properties = tuple((p.get("name"), p.get("value")) for p in case.iter("property"))
        results[case.get("name")] = Result(outcome, message, float(case.get("time")), properties)
    return results


def expect(results: dict[str, Result], test: str, outcome: str, *phrases: str) -> Result:
    got = results[test]
    assert got.outcome == outcome, f"{test}: got {got.outcome}, but should be {outcome}\n{got.message}"
    for phrase in phrases:
        assert phrase in got.message, f"{test}: got message without {phrase!r}:\n{got.message}"
    return got


# ---- in-process: the pieces that need no ranks ----


def module_level_check(ctx):
    return ctx


def test_only_module_level_functions_can_be_sent_to_ranks():
    assert address_of(module_level_check) == (__name__, "module_level_check")

    def nested(ctx):
        return ctx

    for fn in (nested, lambda ctx: ctx):
        with pytest.raises(TypeError, match="should be a module-level function"):
            address_of(fn)


def test_settle_fails_with_every_failing_ranks_traceback():
    outcomes = [
        Outcome.failed(0, "Traceback: zero"),
        Outcome(1, "passed"),
        Outcome.failed(2, "Traceback: two"),
    ]
    with pytest.raises(pytest.fail.Exception) as info:
        settle(outcomes, "check_x")
    message = str(info.value)
    assert "check_x failed on rank 0, 2 of world size 3" in message, message
    assert "Traceback: zero" in message and "Traceback: two" in message, message


def test_settle_skips_on_one_ranks_skip_and_returns_values_by_rank():
    with pytest.raises(pytest.skip.Exception, match="rank 1: too few GPUs"):
        settle([Outcome(0, "passed"), Outcome(1, "skipped", "too few GPUs")], "check_x")
    assert settle([Outcome(1, "passed", value="b"), Outcome(0, "passed", value="a")], "check_x") == ["a", "b"]


class _CrashingLauncher:
    """Plain mode whose rank 1 dies of SIGSEGV in the first ``crashes`` runs, then passes."""

    mode = "plain"

    def __init__(self, crashes: int, reruns: int) -> None:
        self.settings = Settings("plain", 2, PG_TIMEOUT, RANK_TIMEOUT, "x", crash_reruns=reruns)
        self.crashes, self.runs = crashes, 0

    def backend(self, world_size):
        return "gloo"

    def run(self, world_size, fn, address, args, kwargs):
        self.runs += 1
        if self.runs <= self.crashes:
            died = Outcome.failed(1, "rank 1 died of SIGSEGV (exit code -11)\nCurrent thread 0x1 (most recent call "
                                     'first):\n  File "peer.py", line 556 in finish_param_sync', True, "SIGSEGV")
            return [Outcome.failed(0, "killed", True), died]
        return [Outcome(0, "passed", value=0), Outcome(1, "passed", value=1)]


@pytest.mark.parametrize("crashes, reruns, runs, passes", [(1, 1, 2, True), (2, 1, 2, False), (1, 0, 1, False),
                                                            (2, 2, 3, True), (0, 1, 1, True)])
def test_a_crashed_check_runs_again_as_often_as_crash_reruns_says(crashes, reruns, runs, passes):
    launcher = _CrashingLauncher(crashes, reruns)
    node = type("Node", (), {"user_properties": []})()
    with pytest.warns(RankCrashWarning) if min(crashes, reruns) else contextlib.nullcontext() as caught:
        try:
            Ranks(launcher, 2, node).run(module_level_check)
            passed = True
        except pytest.fail.Exception:
            passed = False
    assert (launcher.runs, passed) == (runs, passes), f"got {launcher.runs} runs, passed {passed}"
    said = [value for name, value in node.user_properties if name == CRASH_RERUN]
    assert len(said) == min(crashes, reruns), node.user_properties
    for each in [*said, *(str(w.message) for w in (caught or []))]:
        assert "rank 1 died of SIGSEGV (File \"peer.py\", line 556 in finish_param_sync)" in each, each


def test_settings_refuse_negative_crash_reruns():
    with pytest.raises(pytest.UsageError, match="--crash-reruns: got -1, but should be 0 or more"):
        settings_from(_Options(crash_reruns=-1), environ={})


class _Options:
    def __init__(self, **options):
        self.options = {"world_size": None, "pg_timeout": 60.0, "rank_timeout": 120.0, "impl": "x", "crash_reruns": 1,
                        **options}

    def getoption(self, name, default=None):
        return self.options.get(name, default)


def test_settings_refuse_a_rank_timeout_shorter_than_the_pg_timeout():
    with pytest.raises(
        pytest.UsageError, match="--rank-timeout: got 30 s, but should be larger than --pg-timeout"
    ):
        settings_from(_Options(rank_timeout=30.0), environ={})


def test_world_size_comes_from_option_env_or_torchrun():
    assert settings_from(_Options(), environ={}).world_size == 2
    assert settings_from(_Options(), environ={"DDPC_WORLD_SIZE": "3"}).world_size == 3
    torchrun = {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "MASTER_ADDR": "localhost"}
    assert settings_from(_Options(), environ=torchrun).mode == "torchrun"
    with pytest.raises(pytest.UsageError, match="got 2, but torchrun started 4 processes"):
        settings_from(_Options(world_size=2), environ=torchrun)


def test_ranks_that_chose_different_backends_are_refused_by_name(tmp_path):
    store = dist.FileStore(str(tmp_path / "store"), 2)
    store.set("ddpc-harness/backend/1", "nccl gpu-node-7")  # the other node chose nccl
    with pytest.raises(BackendMismatch) as info:
        agree_on_backend(store, 0, 2, "gloo")
    message = str(info.value)
    assert "got ['gloo', 'nccl']" in message and "rank 1 (gpu-node-7): nccl" in message, message
    agree_on_backend(dist.FileStore(str(tmp_path / "same"), 1), 0, 1, "gloo")  # one rank agrees with itself


def test_a_gloo_rank_hides_gpus_only_where_there_are_some(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(joining, "_visible_before_hiding", [])
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    keep_off_gpus("gloo")
    assert "CUDA_VISIBLE_DEVICES" not in os.environ, "no GPU here: nothing to hide"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    keep_off_gpus("nccl")
    assert "CUDA_VISIBLE_DEVICES" not in os.environ, "nccl ranks keep their GPUs"
    keep_off_gpus("gloo")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "", "a gloo rank on a GPU machine sees none"
    assert child_environment(world_size=3).get("CUDA_VISIBLE_DEVICES") is None, "a child sees them again"


def test_a_child_run_leaves_torchrun_behind(monkeypatch):
    for name, value in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "1",
                        "TORCHELASTIC_RUN_ID": "x", "GROUP_RANK": "0", "KEEP_ME": "yes"}.items():
        monkeypatch.setenv(name, value)
    env = child_environment(world_size=4)
    assert not launched_by_torchrun(env) and "TORCHELASTIC_RUN_ID" not in env and "GROUP_RANK" not in env, env
    assert env["KEEP_ME"] == "yes" and env["DDPC_WORLD_SIZE"] == "4"


def test_a_pool_that_cannot_start_names_the_rank_and_why():
    pool = WorkerPool(Settings("plain", 2, PG_TIMEOUT, RANK_TIMEOUT, "reference"), backend="no-such-backend")
    try:
        with pytest.raises(
            PoolError, match=r"could not start rank \d of 2 \(backend no-such-backend\)"
        ) as info:
            pool.start(frozenset())
    finally:
        pool.close(graceful=False)
    assert "no-such-backend" in str(info.value).split("\n", 1)[1], str(info.value)


# ---- plain pytest: the parent drives a worker pool ----
# One child run: the suite's own harness tests, then the broken checks (with
# -p as well as the suite's conftest, which must not register the plugin twice).


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict[str, Result]]:
    xml = tmp_path_factory.mktemp("plain") / "junit.xml"
    proc = run_pytest(*PLUGIN, HARNESS_TESTS, FAKES, "--world-size", "2", *TIMEOUTS, f"--junitxml={xml}")
    assert proc.returncode == 1, (
        f"got exit {proc.returncode}, but should be 1 (failures)\n{proc.stdout[-3000:]}"
    )
    return proc, junit_results(xml)


def test_plain_mode_passes_the_harness_tests_at_world_size_2(plain):
    proc, results = plain
    assert f"multigpu: plain mode, world size 2, backend {pick_backend(2)}" in proc.stdout, proc.stdout[:1500]
    for test in HARNESS_TEST_NAMES:
        expect(results, test, "passed")


def test_plain_mode_at_world_size_1_skips_what_needs_peers(plain):
    expect(
        plain[1],
        "test_at_world_size_1_peers_are_missing",
        "skipped",
        "needs at least 2 ranks, got world size 1",
    )


def test_plain_a_failure_on_rank_1_fails_the_test_with_its_traceback(plain):
    got = expect(
        plain[1],
        "test_fails_on_rank_1",
        "failure",
        "failed on rank 1 of world size 2",
        "got rank 1, which fails on purpose",
    )
    assert "rank 0 ---" not in got.message, got.message


def test_plain_a_skip_on_one_rank_skips_the_test(plain):
    expect(plain[1], "test_skips_on_rank_1", "skipped", "rank 1: rank 1 skips on purpose")


def test_plain_a_rank_raising_before_a_collective_fails_on_the_pg_timeout(plain):
    got = expect(
        plain[1],
        "test_rank_1_raises_before_a_collective",
        "failure",
        "failed on rank 0, 1 of world size 2",
        "rank 1 raises before the collective",
        "Timed out",
    )
    assert got.seconds < RANK_TIMEOUT + 10, f"got {got.seconds:.1f} s, but should end soon after --pg-timeout"


def test_plain_a_dead_or_stuck_rank_fails_the_test_and_is_named_with_where_it_waited(plain):
    expect(plain[1], "test_dies_on_rank_1", "failure", "rank 1 died (exit code 3)")
    expect(plain[1], "test_dies_of_a_signal_on_rank_1", "failure", "rank 1 died of SIGABRT (exit code -6)",
           "its threads' stacks as it died:", "in check_dies_of_a_signal_on_rank_1")
    hung = expect(plain[1], "test_hangs_on_rank_0", "failure", "rank 0 was still running", "so it is killed",
                  "its stack when killed:", "in check_hangs_on_rank_0")
    expect(plain[1], "test_hangs_on_rank_0_after_rank_1_fails", "failure", "rank 1 fails on purpose",
           "rank 0 was still running", "its stack when killed:", "in check_hangs_on_rank_0_after_rank_1_fails")
    assert hung.seconds < RANK_TIMEOUT + 10, (
        f"got {hung.seconds:.1f} s, but should end soon after --rank-timeout"
    )


def test_plain_a_check_whose_rank_crashed_runs_again_on_fresh_ranks_and_says_so(plain):
    once = expect(plain[1], "test_dies_of_a_signal_once_on_rank_1", "passed")
    assert [name for name, _ in once.properties] == [CRASH_RERUN], once.properties
    said = once.properties[0][1]
    for phrase in ("rank 1 died of SIGSEGV", "check_dies_of_a_signal_once_on_rank_1", "run again on fresh ranks"):
        assert phrase in said, f"got {said!r}, which should say {phrase!r}"
    always = expect(plain[1], "test_dies_of_a_signal_on_rank_1", "failure", "rank 1 died of SIGABRT")
    assert [name for name, _ in always.properties] == [CRASH_RERUN], (
        f"got {always.properties}, but a crash that comes back should be rerun once, then fail")


def test_plain_the_pool_is_restarted_after_failures(plain):
    expect(plain[1], "test_passes_after_a_failure", "passed")
    expect(plain[1], "test_after_the_timeout", "passed")


# ---- torchrun: every rank runs the session ----


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict[str, Result]]:
    xml = tmp_path_factory.mktemp("torchrun") / "junit.xml"
    proc = run_torchrun(
        *PLUGIN, HARNESS_TESTS, FAKES, "-k", "not dies and not hangs", *TIMEOUTS, f"--junitxml={xml}"
    )
    assert proc.returncode == 1, f"got exit {proc.returncode}, but should be 1\n{proc.stdout[-3000:]}"
    return proc, junit_results(xml)


def test_torchrun_passes_the_harness_tests_and_only_rank_0_reports(torchrun):
    proc, results = torchrun
    assert f"multigpu: torchrun mode, world size 2, backend {pick_backend(2)}" in proc.stdout, proc.stdout[:1500]
    for test in HARNESS_TEST_NAMES:
        expect(results, test, "passed")
    sessions = proc.stdout.count("test session starts")
    assert sessions == 1, f"got {sessions} session headers on the terminal, but should be 1 (rank 0's)"


def test_torchrun_every_rank_agrees_on_a_failure_or_skip_on_one_rank(torchrun):
    results = torchrun[1]
    expect(
        results,
        "test_fails_on_rank_1",
        "failure",
        "failed on rank 1 of world size 2",
        "got rank 1, which fails on purpose",
    )
    expect(results, "test_skips_on_rank_1", "skipped", "rank 1: rank 1 skips on purpose")
    expect(results, "test_passes_after_a_failure", "passed")
    expect(
        results,
        "test_at_world_size_1_peers_are_missing",
        "skipped",
        "needs world size 1, got 2 from torchrun",
    )


def test_torchrun_a_timeout_breaks_the_group_and_later_tests_fail_fast(torchrun):
    results = torchrun[1]
    expect(
        results,
        "test_rank_1_raises_before_a_collective",
        "failure",
        "failed on rank 0, 1 of world size 2",
        "rank 1 raises before the collective",
        "Timed out",
    )
    after = expect(results, "test_after_the_timeout", "failure", "process group broken by an earlier timeout")
    assert after.seconds < 1.0, f"got {after.seconds:.1f} s, but should fail at once"


def test_torchrun_refuses_to_run_when_ranks_collect_different_tests():
    proc = run_torchrun(*PLUGIN, "tests/fakes/multirank_uneven.py")
    assert proc.returncode != 0, proc.stdout[-2000:]
    output = proc.stdout + proc.stderr
    assert "collection differs between ranks" in output, output[-3000:]
    assert "test_only_on_rank_1" in output, output[-3000:]
