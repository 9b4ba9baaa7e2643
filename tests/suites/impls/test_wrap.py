"""``--impl wrap:package.module:factory``: a wrapper is tested at the ddp level with no adapter class."""

import re

import pytest

from suites.impls import load_implementation

from tests.pytest_run import run_pytest

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


def test_a_factory_provides_the_ddp_level_and_the_suites_checkpoint_only():
    """The checkpoint level is the suite's own stepping optimizer's (a factory has no optimizer level)."""
    impl = load_implementation(EXAMPLE)
    assert impl.capabilities == {"ddp", "checkpoint"}, impl.capabilities
    assert impl.name == EXAMPLE


# What a factory gets from observation alone, beyond the numerics: the scaling-and-once check and no_sync's.
OBSERVED = ("suites/multigpu/test_communication.py::test_each_gradient_element_is_reduced_once_with_one_scaling"
            "[allreduce]", "suites/multigpu/test_no_sync.py::test_no_sync_launches_no_reduction[allreduce]")
# ... and with factory.bucket_size declared and several buckets, the bucket and overlap checks.
DECLARED = ("suites/multigpu/test_communication.py::test_buckets_are_reduced_as_declared[allreduce-tiny]",
            "suites/multigpu/test_overlap.py::test_collectives_launch_during_backward_only_with_overlap"
            "[allreduce-overlap]")
# The least each passes: a floor, as new axes and compositions add checks (and a stored row set changes with them).
FACTORIES = [
    ("wrap:fixtures.examples.torch_ddp_factory:factory", 57, OBSERVED),
    (EXAMPLE, 60, OBSERVED + DECLARED),
    ("wrap:fixtures.examples.main_grad_buffer:factory", 15,
     ("suites/multigpu/test_observed_layout.py::test_main_grad_views_are_the_declared_layout[distopt]",
      "suites/multigpu/test_communication.py::test_collective_sizes_are_what_the_policy_demands[distopt-padded]")),
    ("wrap:fixtures.examples.main_grad_buffer:configured", 72,
     ("suites/multigpu/test_vs_torch_ddp.py::test_matches_torch_ddp[allreduce-overlap-mid]",
      "suites/multigpu/test_observed_layout.py::test_main_grad_views_are_the_declared_layout[distopt-tied-embedding]")),
]


@pytest.mark.parametrize("spec, passed, observed", FACTORIES, ids=[f[0].split(":")[1] for f in FACTORIES])
def test_the_examples_pass_with_their_observed_checks(spec, passed, observed):
    """A plain torch DDP factory, the worked examples: no failure, and the checks from observation ran."""
    proc = run_pytest("suites/multigpu", "--impl", spec, "-rA", in_process=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    got = int(re.search(r" (\d+) passed", proc.stdout).group(1))
    assert got >= passed, (f"{spec}: got {got} checks passed, but should be {passed} at least (fewer: checks it "
                           "passed now skip)\n" + proc.stdout[-800:])
    for nodeid in observed:
        assert f"PASSED {nodeid}" in proc.stdout, f"{nodeid}: got not passed, but should run and pass"


def test_a_wrapper_that_forgets_to_average_is_caught():
    proc = run_pytest(*CHECKS, "--impl", "wrap:tests.fakes.unaveraged_hooks:factory", in_process=True)
    assert proc.returncode == 1, proc.stdout[-3000:]
    # Every grad and training comparison fails; no_sync (local grads, no reduction inside) and overlap
    # (launch order) cannot see it.
    assert "16 failed, 3 passed" in proc.stdout, proc.stdout[-800:]
