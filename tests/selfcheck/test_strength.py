"""Every deliberately broken implementation fails the suites, in the tests its catalogue entry names, by a check.

A test that fails because the broken implementation crashed (a ``TypeError``
from a seam it overrides with the wrong signature, say) proves nothing about
the check: the named tests must fail with an assertion.

The reference passing the same suites is shown by the suite runs themselves.
Each entry runs only the tests its ``CAUGHT_BY`` names (multigpu ones at
world size 2), under the "strength" hypothesis profile (derandomized, no
shrinking); the report's strength table runs the whole suites. A bug that
needs several axes to meet (``MEETS``) runs the compositions of the covering
array that contain them (every pair, or every three values; the one
composition they make, for four axes or more): one at least
must catch it (another axis of a composition may mask a bug: fp32 local
accumulation of every param leaves nothing in the buffer for a bug in the
buffer's own no_sync path to double), and none may crash.
"""

import fnmatch

import pytest

from fixtures.broken import catalogue
from reports.conformance.suites import run_suite
from selfcheck.strength import STRENGTH_ARGS, composed_args, composed_catchers

ENTRIES = catalogue()


def test_catalogue_covers_at_least_15_distinct_bugs():
    bugs = {e.bug for e in ENTRIES}
    assert len(bugs) >= 15, f"distinct bugs: got {len(bugs)}, but should be at least 15"


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.meets], ids=[e.name for e in ENTRIES if e.meets])
def test_every_composition_that_meets_a_bugs_axes_catches_it(entry):
    strength, ids = composed_catchers(entry.meets)
    result = run_suite("suites/multigpu/test_compositions.py", entry.impl_spec,
                       [*STRENGTH_ARGS, *composed_args(strength, ids)], in_process=True)
    checked = [f for f in result.failed_ids if f not in result.crashed_ids]
    assert ids and checked and not result.crashed_ids, (
        f"{entry.name} ({entry.bug}), axes {entry.meets}: got {len(checked)} of the {len(ids)} {strength} compositions "
        f"that meet them failing by a check and {len(result.crashed_ids)} crashing, but should be one at least, and "
        "no crash\n" + "\n".join(map(str, result.failures[:3])))


@pytest.mark.parametrize("entry", [e for e in ENTRIES if not e.meets], ids=[e.name for e in ENTRIES if not e.meets])
def test_broken_implementation_is_caught(entry):
    failed, crashed = [], []
    for module in sorted({pattern.split("::")[0] for pattern in entry.caught_by}):
        only = [f"--only={p}" for p in entry.caught_by if p.startswith(module + "::")]
        result = run_suite(module, entry.impl_spec, [*STRENGTH_ARGS, *only], in_process=True)
        assert result.exit_code == 1, (
            f"{entry.name} in {module}: got exit {result.exit_code}, but should be 1 (tests failing)\n"
            + "\n".join(map(str, result.failures[:5]))
        )
        failed += result.failed_ids
        crashed += result.crashed_ids
    for pattern in entry.caught_by:
        checked = [f for f in failed if fnmatch.fnmatchcase(f, pattern) and f not in crashed]
        assert checked, (
            f"{entry.name} ({entry.bug}): got failures {failed[:8]} (crashes: {crashed[:8]}), but should include "
            f"{pattern}, failed by a check"
        )
