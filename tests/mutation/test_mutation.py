"""The mutation-score command's own logic, without cosmic-ray: which mutants run and in what order, which
checks run against them, session bookkeeping across interrupted runs, the score by population."""

import json
import sys
import time
from pathlib import Path

import pytest

from mutation import ROOT
from mutation.checks import command, ordered_test_files
from mutation.population import Mutant, annotation_spans, choose, inside, run_order
from mutation.runner import first_failure, run_checks
from mutation.score import load_equivalents, summarize
from datamodel import from_json
from reports.render.mutation import score_markdown, summary_markdown
from reports.store.model import MutationScore
from reports.store.mutation_score import read_score
from mutation.session import Session, SessionError, fingerprint, locked
from mutation.sitting import run_sitting, within_limits

SOURCE = '''from __future__ import annotations

def f(x: int | None, y: dict[str, int] = {}) -> list[int] | None:
    z: int | str = x | 1
    return [z]
'''


def test_annotations_are_found_and_code_is_not(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(SOURCE)
    spans = annotation_spans(path)
    line3, line4 = SOURCE.splitlines()[2], SOURCE.splitlines()[3]
    assert inside(spans, (3, line3.index("| None"))), "the `|` of the argument's annotation"
    assert inside(spans, (3, line3.index("| None:"))), "the `|` of the return annotation"
    assert inside(spans, (4, line4.index("| str"))), "the `|` of a variable annotation"
    assert not inside(spans, (4, line4.index("| 1"))), "the `|` of code, which is evaluated, got marked as annotation"
    assert not inside(spans, (3, line3.index("{}"))), "a default value got marked as annotation"


def test_triage_entries_need_a_reason(tmp_path):
    path = tmp_path / "mutants.toml"
    path.write_text('[[equivalent]]\nmutant = "reference/ddp.py:1:AddNot:0"\n')
    with pytest.raises(ValueError, match=r"equivalent\[0\] has keys \['mutant'\], but should have 'mutant' and 'why'"):
        load_equivalents(path)
    path.write_text('[[equivalent]]\nmutant = "reference/ddp.py:1:AddNot:0"\nwhy = "x"\n')
    assert load_equivalents(path) == {"reference/ddp.py:1:AddNot:0": "x"}


def test_a_mutant_key_names_module_line_operator_occurrence():
    mutant = Mutant("reference/clip.py", 36, "core/ReplaceBinaryOperator_Pow_Add", 1)
    assert mutant.key == "reference/clip.py:36:core/ReplaceBinaryOperator_Pow_Add:1"
    assert Mutant.from_key(mutant.key) == mutant
    with pytest.raises(ValueError, match=r"got 'clip.py:x', but should be 'module:line:operator:occurrence'"):
        Mutant.from_key("clip.py:x")


def pool(module, n):
    return [Mutant(module, line, "core/AddNot", 0) for line in range(1, n + 1)]


def test_whole_takes_every_mutant_and_a_sample_the_same_share_of_every_module():
    eligible = {"a.py": pool("a.py", 100), "b.py": pool("b.py", 40), "c.py": pool("c.py", 2)}
    assert choose(eligible, whole=True, sample=1, seed=0) == [m for p in eligible.values() for m in p]
    sampled = choose(eligible, whole=False, sample=14, seed=0)
    per_module = {name: sum(m.module == name for m in sampled) for name in eligible}
    assert per_module == {"a.py": 10, "b.py": 4, "c.py": 1}, f"got {per_module}: 10% each, at least 1"
    assert sampled == choose(eligible, whole=False, sample=14, seed=0), "the same seed should give the same sample"
    assert sampled != choose(eligible, whole=False, sample=14, seed=1), "another seed should give another sample"


def test_run_order_is_a_seeded_shuffle():
    mutants = pool("a.py", 50)
    order = run_order(mutants, seed=0)
    assert sorted(order) == sorted(mutants) and order == run_order(list(reversed(mutants)), seed=0)
    assert order != mutants and order != run_order(mutants, seed=1)


def test_a_directory_stands_for_its_test_modules_not_yet_listed_slow_ones_last(tmp_path):
    for name in ("suites/multigpu/test_a.py", "suites/multigpu/test_bad_input.py", "suites/multigpu/test_z.py",
                 "suites/multigpu/helpers.py", "suites/multigpu/harness/plain.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    got = ordered_test_files(["tests/test_x.py", "suites/multigpu/test_z.py", "suites/multigpu"], tmp_path)
    assert got == ["tests/test_x.py", "suites/multigpu/test_z.py", "suites/multigpu/test_a.py",
                   "suites/multigpu/test_bad_input.py"]


@pytest.mark.parametrize("module", ["reference/clip.py", "reference/optimizer.py", "reference/finalize.py",
                                    "reference/bucket_group.py", "reference/config.py"])
def test_a_runtime_module_runs_every_multigpu_test_module_and_no_layout_test(module):
    """The layout suite calls only plan and build: it cannot reach the runtime modules."""
    files = command([module], ROOT)
    multigpu = {str(p.relative_to(ROOT)) for p in (ROOT / "suites/multigpu").glob("test_*.py")}
    assert multigpu <= set(files), f"{module}: missing {sorted(multigpu - set(files))}"
    assert not [f for f in files if f.startswith("suites/layout")], f"{module}: got layout tests in {files}"


def make_session(path, tree, modules=("a.py", "b.py"), mode="whole", order=None):
    for module in modules:
        (tree / module).write_text(f"# {module}\n")
    keys = order or [Mutant(m, line, "core/AddNot", 0).key for m in modules for line in (1, 2)]
    options = {"modules": list(modules), "whole": True, "sample": 120, "seed": 0}
    populations = {m: {"mode": mode, "sha256": fingerprint(tree / m), "mutants": 5, "in_annotations": 1, "eligible": 4}
                   for m in modules}
    session = Session(path, "0123456789abcdef", False, options, populations, keys)
    session.save()
    return session


def result(key, outcome="killed", diff=""):
    return {"mutant": key, "outcome": outcome, "seconds": 1.0, "killed_by": None, "diff": diff}


def test_a_session_keeps_each_result_whole_and_knows_what_is_pending(tmp_path):
    session = make_session(tmp_path / "s", tmp_path)
    first, second, *rest = session.order
    session.record(result(second))
    reopened = Session.open(tmp_path / "s")
    assert reopened == session
    results = reopened.results()
    assert list(results) == [second] and reopened.pending(results) == [first, *rest]
    assert not list((tmp_path / "s").rglob("*.part")), "a result should be renamed into place whole"
    reopened.forget([second])
    assert reopened.pending(reopened.results()) == session.order


def test_a_session_refuses_other_options_and_changed_modules(tmp_path):
    session = make_session(tmp_path / "s", tmp_path)
    assert session.conflicts({"modules": None, "whole": True, "sample": None, "seed": None}) == []
    (problem,) = session.conflicts({"modules": ["a.py"], "whole": None, "sample": None, "seed": None})
    assert problem.startswith("--module: got ['a.py'], but session") and "['a.py', 'b.py']" in problem
    assert session.changed_modules(tmp_path) == []
    (tmp_path / "b.py").write_text("# changed\n")
    (problem,) = session.changed_modules(tmp_path)
    for part in ("b.py: got content sha256", "would land on the wrong lines",
                 "git checkout 0123456789 -- b.py", "another --session"):
        assert part in problem, f"refusal: got {problem!r}, but should contain {part!r}"


def test_one_run_at_a_time_holds_a_session(tmp_path):
    with locked(tmp_path / "s"):
        with pytest.raises(SessionError, match="another run holds it"):
            with locked(tmp_path / "s"):
                pass
    with locked(tmp_path / "s"):
        pass


def test_limits_stop_a_run_between_mutants():
    assert within_limits(0, 0.0, None, None)
    assert not within_limits(3, 0.0, 3, None) and within_limits(2, 0.0, 3, None)
    assert not within_limits(0, 600.0, None, 10) and within_limits(0, 599.0, None, 10)


def test_runs_continue_where_the_last_one_stopped_or_was_interrupted(tmp_path):
    session = make_session(tmp_path / "s", tmp_path)
    ran = []

    def run_one(key):
        ran.append(key)
        return result(key)

    def interrupted_at_the_third(key):
        if len(ran) == 2:
            raise KeyboardInterrupt
        return run_one(key)

    assert run_sitting(session.pending(session.results()), run_one, session.record, 1, None, time.monotonic()) == 1
    with pytest.raises(KeyboardInterrupt):
        run_sitting(session.pending(session.results()), interrupted_at_the_third, session.record, None, None,
                    time.monotonic())
    assert set(session.results()) == set(session.order[:2]), "the interrupted mutant should not be recorded"
    clock = iter([30.0, 61.0]).__next__  # a minute passes during the first
    assert run_sitting(session.pending(session.results()), run_one, session.record, None, 1, 0.0, clock) == 1
    assert run_sitting(session.pending(session.results()), run_one, session.record, None, None, 0.0) == 1
    assert ran == session.order and session.pending(session.results()) == []


def test_the_score_counts_each_module_by_population(tmp_path):
    a, b = "a.py", "b.py"
    keys = [Mutant(a, 1, "core/AddNot", 0).key, Mutant(a, 2, "core/AddNot", 0).key, Mutant(b, 1, "core/AddNot", 0).key]
    session = make_session(tmp_path / "s", tmp_path, order=keys)
    session.modules[b]["mode"] = "sampled"
    results = {keys[0]: result(keys[0]), keys[1]: result(keys[1], "survived", "-x\n+y\n"),
               keys[2]: result(keys[2], "survived")}
    summary = summarize(session, results, {keys[2]: "why"})
    assert summary["modules"][a] == {"mode": "whole", "mutants": 5, "in_annotations": 1, "eligible": 4, "chosen": 2,
                                     "run": 2, "killed": 1, "survived": 1, "equivalent": 0}
    assert summary["modules"][b]["equivalent"] == 1 and summary["modules"][b]["mode"] == "sampled"
    assert (summary["killed"], summary["non_equivalent"], summary["score"]) == (1, 2, 0.5)
    assert summary["survivors"] == [{"mutant": keys[1], "diff": "-x\n+y\n"}]
    text = summary_markdown(from_json(MutationScore, summary))
    for part in ("**50%**", "1 of 2", "3 of a population of 8 mutants run", "every mutant of 1 module",
                 "a seeded sample of 1 module", "1 triaged equivalent", "| a.py | whole | 4 | 2 | 1 | 0 | 1 | 50% |",
                 "| b.py | sampled | 4 | 1 | 0 | 1 | 0 | n/a |"):
        assert part in text, f"summary: got {text!r}, but should contain {part!r}"


def test_the_score_file_is_read_in_its_format(tmp_path):
    path = tmp_path / "score.json"
    assert read_score(path) is None
    assert "not measured when this run was made" in score_markdown(None)
    path.write_text(json.dumps({"score": 1.0}))
    with pytest.raises(ValueError, match="got format None, but should be 2"):
        read_score(path)
    path.write_text(json.dumps({"format": 2, "score": 1.0}))
    with pytest.raises(ValueError, match="rerun python -m mutation"):
        read_score(path)
    assert "| **all** |" in score_markdown(read_score()), "the committed score file should render"


def running(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]) != "Z"
    except FileNotFoundError:
        return False


def test_checks_pass_fail_or_time_out_and_leave_no_process_behind(tmp_path):
    assert run_checks([sys.executable, "-c", "print('ok')"], tmp_path, 30) == (True, "ok\n")
    assert not run_checks([sys.executable, "-c", "raise SystemExit(1)"], tmp_path, 30)[0]
    rank = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "open('rank', 'w').write(str(p.pid)); time.sleep(60)")
    assert run_checks([sys.executable, "-c", rank], tmp_path, 2.0) == (False, "timeout: still running after 2 s")
    pid = int((tmp_path / "rank").read_text())
    deadline = time.monotonic() + 5
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(pid), "a process the checks started outlived their timeout"


def test_a_kill_names_the_first_failed_test():
    output = "..F\nFAILED suites/x.py::test_a - AssertionError\nFAILED suites/x.py::test_b\n1 failed in 2s\n"
    assert first_failure(output) == "FAILED suites/x.py::test_a - AssertionError"
    assert first_failure("timeout: still running after 300 s") == "timeout: still running after 300 s"
