"""The bounds of the single-process oracle (docs/rules.md, section 7) catch the smallest bug of each kind.

The reference passes every composition (the suite's runs show it); these
are the other side: one rounding too many in a reduction, a norm or a clip
coefficient, one zero counted too many, or one FP8 code off, each caught by the check that
owns it, in the composition where the bug can act.
"""

import pytest

from tests.pytest_run import run_pytest

SMALLEST = [
    ("bf16_sum", "microbatches=2,precision=bf16-fp32-grads", "grad of"),
    ("bf16_norm", "clip=l2", "grad norm"),
    ("zero_counted_twice", "base", "zero grad elements"),
    ("bf16_clip", "clip=l2", "param"),
    ("fp8_code_off", "policy=padded,precision=bf16-fp32-grads,quantized=fp8", "param"),
]


@pytest.mark.parametrize("bug, composition, caught_by", SMALLEST, ids=[s[0] for s in SMALLEST])
def test_the_smallest_bug_of_each_kind_is_caught(bug, composition, caught_by):
    proc = run_pytest("suites/multigpu", "--impl", f"tests.fakes.smallest_bugs:{bug}", "--case", composition,
                      in_process=True)
    assert proc.returncode == 1 and "1 failed" in proc.stdout, proc.stdout[-2000:]
    assert f"AssertionError: step 0 rank 0 {caught_by}" in proc.stdout or f"AssertionError: step 0 {caught_by}" \
        in proc.stdout, f"{bug}: got a failure other than the {caught_by!r} check's\n{proc.stdout[-2000:]}"
