"""Selecting the implementation under test: registry, module paths, capability skips, header."""

import re

import pytest

from suites.impls import REGISTRY, load_implementation
from suites.impls.support import check_table

from tests.pytest_run import run_pytest


def test_registered_names_load():
    for name in REGISTRY:
        got = load_implementation(name).name
        assert got == name, (f"REGISTRY[{name!r}] loads an implementation named {got!r}: its `name` should be the "
                             "registered name (suites/impls/__init__.py), which --impl, the expectations and the "
                             "stored covering rows go by")


def test_the_adapter_to_start_from_loads_and_says_how_to_install_its_peer():
    """fixtures/examples/peer_adapter.py, the skeleton docs/extending.md (d) step 1 starts from: a table the suites
    accept and a package not installed, said with its install line, so that every check skips."""
    impl = load_implementation("fixtures.examples.peer_adapter")
    check_table(impl)
    assert impl.unavailable is not None and "pip install -r requirements-fancyddp.txt" in impl.unavailable, (
        impl.unavailable)
    assert impl.capabilities == {"ddp", "checkpoint"} and not impl.knobs, (impl.capabilities, impl.knobs)
    assert "fancyddp" not in REGISTRY, "an example, never a registered peer"


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError) as info:
        load_implementation("no_such_impl_anywhere")
    message = str(info.value)
    assert "--impl: got 'no_such_impl_anywhere'" in message and "reference" in message, message


def test_a_module_that_exists_but_fails_to_import_says_so_not_that_the_name_is_wrong(tmp_path, monkeypatch):
    (tmp_path / "broken_impl.py").write_text("import no_such_dependency_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError) as info:
        load_implementation("broken_impl")
    assert str(info.value) == ("--impl: 'broken_impl' (broken_impl) failed to import: ModuleNotFoundError: No module "
                               "named 'no_such_dependency_anywhere'"), info.value


def test_module_without_implementation_object_is_rejected():
    with pytest.raises(ValueError, match="should be an object following"):
        load_implementation("tests.pytest_run")


def test_report_header_names_the_implementation():
    proc = run_pytest("suites/layout/test_golden.py", "-k", "notes_example_1", "--impl", "reference", in_process=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "implementation under test: reference 0.1.0" in proc.stdout, proc.stdout[:1000]


def test_unavailable_implementation_skips_everything_with_its_reason():
    proc = run_pytest("suites/layout/test_golden.py", "--impl", "tests.fakes.unavailable", in_process=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert " passed" not in proc.stdout, f"got passes: {proc.stdout[-500:]}, but should be all skipped"
    assert "the fake peer library is not installed" in proc.stdout, proc.stdout[-1000:]


def test_missing_level_is_skipped_not_passed():
    proc = run_pytest("suites/layout/test_views.py", "--impl", "tests.fakes.layout_only", in_process=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert " passed" not in proc.stdout, f"got passes: {proc.stdout[-500:]}, but should be all skipped"
    assert "does not provide the 'buffer' level" in proc.stdout, proc.stdout[-1000:]



def test_inexpressible_configuration_is_skipped_at_collection_with_its_reason():
    """Parametrized policies, ``requires(LayoutConfig(...))`` and multigpu cases all ask ``unsupported``."""
    proc = run_pytest("suites/layout/test_golden.py", "suites/multigpu/test_no_sync.py",
                      "--impl", "tests.fakes.packed_only", "--world-size", "1", in_process=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    for reason in ("'padded' policy", "'high-busbw' policy", "'shard-aligned' policy"):
        assert f"the fake knows no {reason}" in proc.stdout, f"skip reasons: got {proc.stdout[-1500:]}"
    reason = r"test_no_sync.py:\d+: policy: the fake knows no 'padded' policy"
    assert re.search(reason, proc.stdout), proc.stdout[-1500:]
    # 28 packed matrix rows pass; 28 padded rows, the design notes' 6 cases, the high-busbw divisor beyond
    # dp = 2**16, the padded no_sync cases and the packed ones (world size 1 has no peers to keep grads
    # from) skip.
    assert "28 passed, 39 skipped" in proc.stdout, proc.stdout[-600:]


def test_requires_names_only_known_levels(tmp_path):
    test = tmp_path / "test_typo.py"
    test.write_text("import pytest\n\n@pytest.mark.requires('layuot')\ndef test_x(impl):\n    pass\n")
    proc = run_pytest(str(test), "-p", "suites.plugin")
    assert proc.returncode == 4, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "requires('layuot'): got an unknown level" in proc.stderr, proc.stderr[-1500:]


def test_only_keeps_the_tests_whose_node_id_matches():
    proc = run_pytest("suites/layout/test_golden.py", "-q",
                      "--only=suites/layout/test_golden.py::test_upstream_matrix[[]None-*-plain]",
                      "--only=*::test_notes_worst_case*", in_process=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    # None-packed and None-padded, each without and with bias, plus the worst case.
    assert "5 passed, 58 deselected" in proc.stdout, proc.stdout[-600:]
