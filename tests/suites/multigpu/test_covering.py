"""Each registered implementation's own rows of the pairwise covering array: stored for what it can express here,
and, with the common rows it runs, meeting every pair of values it can express (counted by ``covering.coverage``,
independently of the generator)."""

import pytest

from suites.impls import REGISTRY, load_implementation
from suites.multigpu import covering, space


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_pair_an_implementation_can_express_meets_in_rows_stored_for_it(name):
    impl = load_implementation(name)
    if impl.unavailable is not None:
        pytest.skip(f"{name} is not installed here: {impl.unavailable}")
    supported = space.supported_by(impl)
    own = covering.OwnRows(supported, 2)
    if own.needed is not None:
        assert own.key in covering.stored().get("implementations", {}), (
            f"{name}'s own rows: got none stored for what it can express here ({own.key}), but should be: "
            "python -m suites.multigpu.covering --write-own")
    ran = [row for row in covering.rows("pairwise") if supported(row)] + covering.for_implementation(supported)
    got = covering.coverage("pairwise", ran, 2, covering.runnable(supported))
    assert got.covered == got.expressible, (
        f"{name}: got {got.covered} of the {got.expressible} pairs it can express met, but should be every one")
