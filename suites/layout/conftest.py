"""Fixtures for the layout suite: the policy axis.

Each policy is parametrized as the configuration that asks for it, so the
suite plugin skips, at collection and with the reason, the policies the
implementation under test cannot express.
"""

import pytest

from reference.layout import POLICIES, LayoutConfig

SHARDED = [name for name, p in POLICIES.items() if p.distributed_optimizer]


@pytest.fixture(scope="session", params=[LayoutConfig(policy=p) for p in POLICIES], ids=list(POLICIES))
def policy(request) -> str:
    """Each padding policy in turn."""
    return request.param.policy


@pytest.fixture(scope="session", params=[LayoutConfig(policy=p) for p in SHARDED], ids=SHARDED)
def sharded_policy(request) -> str:
    """Each policy that shards buffers for the distributed optimizer."""
    return request.param.policy
