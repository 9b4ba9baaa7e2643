"""Repository-wide pytest set-up: the suites' plugin selects the implementation under test."""

pytest_plugins = ["suites.plugin"]
