"""The multigpu suite: its tests get the harness's options and the ``ranks`` fixture.

Registers ``suites.multigpu.harness.plugin`` unless ``-p`` already did (a
non-root conftest may not use ``pytest_plugins``).
"""

import pytest

from suites.multigpu.harness import plugin as harness_plugin


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.is_registered(harness_plugin):
        pluginmanager.register(harness_plugin, "suites.multigpu.harness.plugin")
