"""The project's own tests may run checks on several ranks too: they get the ``ranks`` fixture."""

import pytest

from suites.multigpu.harness import plugin as harness_plugin


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    harness_plugin.register(pluginmanager)
