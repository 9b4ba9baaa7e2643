"""``--impl wrap:package.module:factory``: a wrapper is tested at the ddp level with no adapter class."""

import pytest

from suites.impls import load_implementation

from .pytest_run import run_pytest

EXAMPLE = "wrap:fixtures.examples.bucketed_hooks:factory"
CHECKS = ("suites/multigpu/test_vs_torch_ddp.py", "suites/multigpu/test_no_sync.py", "suites/multigpu/test_overlap.py")


@pytest.mark.parametrize("spec, message", [
    ("wrap:fixtures.examples.bucketed_hooks", "should be wrap:package.module:factory"),
    ("wrap:no_such_module_here:factory", "'no_such_module_here' cannot be imported"),
    ("wrap:fixtures.examples.bucketed_hooks:GradientBucket.nothing", "not a callable factory"),
])
def test_bad_spec_is_named(spec, message):
    with pytest.raises(ValueError, match=message):
        load_implementation(spec)


def test_a_factory_provides_the_ddp_level_only():
    impl = load_implementation(EXAMPLE)
    assert impl.capabilities == {"ddp"}, impl.capabilities
    assert impl.name == EXAMPLE


@pytest.mark.parametrize("spec", [EXAMPLE, "wrap:fixtures.examples.torch_ddp_factory:factory"])
def test_worked_example_and_torch_ddp_factory_pass_the_ddp_checks(spec):
    proc = run_pytest(*CHECKS, "--impl", spec)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # grad sync + training for 6 packed fp32 cases, grad sync for 2 clip cases and the bf16-grads case,
    # 2 no_sync checks, overlap.
    assert "18 passed" in proc.stdout, proc.stdout[-800:]


def test_a_wrapper_that_forgets_to_average_is_caught():
    proc = run_pytest(*CHECKS, "--impl", "wrap:tests.fakes.unaveraged_hooks:factory")
    assert proc.returncode == 1, proc.stdout[-3000:]
    # Every grad and training comparison fails; no_sync (local grads, no reduction inside) and overlap
    # (launch order) cannot see it.
    assert "15 failed, 3 passed" in proc.stdout, proc.stdout[-800:]
