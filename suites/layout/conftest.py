"""Fixtures for the layout suite: the policy axis, skipped where the implementation lacks it."""

import pytest

from reference.layout import POLICIES, LayoutConfig


@pytest.fixture(scope="session", params=list(POLICIES))
def policy(request, impl) -> str:
    """Each padding policy in turn; skipped with the reason if the implementation has no such policy."""
    reason = impl.unsupported(LayoutConfig(policy=request.param))
    if reason:
        pytest.skip(reason)
    return request.param
