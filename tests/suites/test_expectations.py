"""Per-implementation skip/xfail lists: applied by node id, stale entries warned about."""

import pytest

from suites.expectations import Expectation, load_expectations

from tests.pytest_run import run_pytest

TARGET = "suites/layout/test_golden.py::test_notes_example_1_needs_no_padding"


def test_entries_match_exact_ids_parametrized_ids_and_patterns():
    assert Expectation("skip", TARGET, "r").matches(TARGET)
    assert Expectation("skip", "suites/x.py::test_a", "r").matches("suites/x.py::test_a[padded]")
    assert Expectation("skip", "suites/x.py::test_*", "r").matches("suites/x.py::test_b")
    assert not Expectation("skip", "suites/x.py::test_a", "r").matches("suites/x.py::test_ab")
    pasted = "suites/x.py::test_a[world=2,policy=padded]"  # a parametrized id as a rerun line shows it: [ is a glob
    assert Expectation("skip", pasted, "r").matches(pasted), "a whole id pasted as it is should match itself"
    assert not Expectation("skip", pasted, "r").matches("suites/x.py::test_a[world=3,policy=padded]")


def test_entry_without_reason_is_an_error(tmp_path):
    (tmp_path / "x.toml").write_text('[[skip]]\ntest = "a"\n')
    with pytest.raises(ValueError, match=r"skip\[0\] .* should have a non-empty 'test' and 'reason'"):
        load_expectations("x", tmp_path)


def test_skip_applies_and_stale_entry_warns(tmp_path):
    (tmp_path / "reference.toml").write_text(
        f'[[skip]]\ntest = "{TARGET}"\nreason = "deliberately skipped"\n\n'
        '[[xfail]]\ntest = "suites/layout/test_golden.py::test_gone"\nreason = "stale"\n'
    )
    proc = run_pytest("suites/layout/test_golden.py", "-k", "notes_example_1",
                      env={"DDPC_EXPECTATIONS_DIR": str(tmp_path)})
    assert "1 skipped" in proc.stdout and "deliberately skipped" in proc.stdout, proc.stdout[-1500:]
    assert "test_gone' for reference matches no collected test" in proc.stdout, proc.stdout[-1500:]


def test_versions_limit_an_entry_to_the_versions_it_names(tmp_path):
    (tmp_path / "x.toml").write_text(
        '[[skip]]\ntest = "a"\nreason = "before 0.19"\nversions = "<0.19"\n\n'
        '[[xfail]]\ntest = "b"\nreason = "every version"\n'
    )
    assert [e.test for e in load_expectations("x", tmp_path, version="0.16.1")] == ["a", "b"]
    assert [e.test for e in load_expectations("x", tmp_path, version="0.19.2")] == ["b"]
    assert [e.test for e in load_expectations("x", tmp_path, version="0.17.0rc1")] == ["a", "b"]
    assert [e.test for e in load_expectations("x", tmp_path, version="not installed")] == ["b"]
    assert [e.test for e in load_expectations("x", tmp_path, version=None)] == ["a", "b"]


def test_versions_that_are_no_specifiers_are_an_error(tmp_path):
    (tmp_path / "x.toml").write_text('[[skip]]\ntest = "a"\nreason = "r"\nversions = "0.19+"\n')
    with pytest.raises(ValueError, match=r"skip\[0\] versions is '0.19\+', but should be PEP 440"):
        load_expectations("x", tmp_path, version="0.19.2")


def test_entry_for_other_versions_neither_applies_nor_warns(tmp_path):
    (tmp_path / "reference.toml").write_text(
        f'[[skip]]\ntest = "{TARGET}"\nreason = "only for an old reference"\nversions = "<0.0.1"\n'
    )
    proc = run_pytest("suites/layout/test_golden.py", "-k", "notes_example_1",
                      env={"DDPC_EXPECTATIONS_DIR": str(tmp_path)})
    assert "1 passed" in proc.stdout and "only for an old reference" not in proc.stdout, proc.stdout[-1500:]
    assert "matches no collected test" not in proc.stdout, proc.stdout[-1500:]


def test_an_xfail_that_hangs_is_recorded_without_running(tmp_path):
    (tmp_path / "reference.toml").write_text(
        f'[[xfail]]\ntest = "{TARGET}"\nreason = "it hangs"\nrun = false\n')
    proc = run_pytest("suites/layout/test_golden.py", "-k", "notes_example_1", "-rx",
                      env={"DDPC_EXPECTATIONS_DIR": str(tmp_path)})
    assert "1 xfailed" in proc.stdout and "[NOTRUN]" in proc.stdout and "it hangs" in proc.stdout, proc.stdout[-1500:]


@pytest.mark.parametrize("entry", ['[[xfail]]\ntest = "a"\nreason = "r"\nrun = "no"\n',
                                   '[[skip]]\ntest = "a"\nreason = "r"\nrun = false\n'])
def test_run_is_a_boolean_of_an_xfail(tmp_path, entry):
    (tmp_path / "x.toml").write_text(entry)
    with pytest.raises(ValueError, match=r"run is .*, but should be true or false, and only on an xfail"):
        load_expectations("x", tmp_path)


def test_unless_leaves_out_the_tests_of_a_region_that_pass(tmp_path):
    (tmp_path / "x.toml").write_text(
        '[[xfail]]\ntest = "t.py::*[[]*policy=high-busbw*clip=inf*]"\nunless = ["*,instances=2*"]\nreason = "r"\n')
    [entry] = load_expectations("x", tmp_path)
    assert entry.matches("t.py::c[policy=high-busbw,clip=inf,loss=per-token]")
    assert not entry.matches("t.py::c[policy=high-busbw,clip=inf,instances=2]"), "a test unless names is left out"
    (tmp_path / "y.toml").write_text('[[xfail]]\ntest = "t.py::c"\nunless = "*x*"\nreason = "r"\n')
    with pytest.raises(ValueError, match="unless is '\\*x\\*', but should be a list of test patterns"):
        load_expectations("y", tmp_path)


def test_a_list_includes_the_lists_it_names_first_and_refuses_a_cycle_or_a_missing_one(tmp_path):
    (tmp_path / "parent.toml").write_text('[[xfail]]\ntest = "a"\nreason = "the parent\'s finding"\n')
    (tmp_path / "child.toml").write_text('include = ["parent"]\n\n[[xfail]]\ntest = "b"\nreason = "its own"\n')
    assert [e.test for e in load_expectations("child", tmp_path)] == ["a", "b"]
    (tmp_path / "parent.toml").write_text('include = ["child"]\n')
    with pytest.raises(ValueError, match=r"include makes a cycle \(child -> parent -> child\)"):
        load_expectations("child", tmp_path)
    (tmp_path / "child.toml").write_text('include = ["gone"]\n')
    with pytest.raises(ValueError, match=r"include names 'gone', but should name a list"):
        load_expectations("child", tmp_path)
