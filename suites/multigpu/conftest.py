"""The multigpu suite: its tests get the harness's options and the ``ranks`` fixture."""

import pytest

from suites.multigpu.harness import plugin as harness_plugin


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    harness_plugin.register(pluginmanager)
