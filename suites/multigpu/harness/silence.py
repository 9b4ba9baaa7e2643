"""Under torchrun only rank 0 talks: the other ranks' reports go to a per-rank log file.

Every rank runs the same session, so N terminal reporters would print N
interleaved copies of it and N junit writers would race for one file (theirs go
next to the log instead).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from _pytest.config import create_terminal_writer
from _pytest.junitxml import LogXML


def log_dir() -> Path:
    run = os.environ.get("TORCHELASTIC_RUN_ID") or str(os.getppid())
    return Path(tempfile.gettempdir()) / "ddpc-multigpu" / run


def silence(config: pytest.Config, rank: int) -> Path:
    """Send this rank's terminal report to ``log_dir()/rank-N.log`` and its junit xml beside it."""
    path = log_dir() / f"rank-{rank}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    log = open(path, "w", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives as long as the session
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter._tw = create_terminal_writer(config, log)  # pytest keeps its terminal writer here
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, LogXML):
            plugin.logfile = str(path.with_suffix(".xml"))  # where LogXML writes at session end
    if config.getoption("capture") != "fd":
        # Nothing captures the checks' own output (-s): send this process's stdout and stderr
        # to the log too. Under fd capture pytest restores these descriptors itself, so it is left alone.
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    return path
