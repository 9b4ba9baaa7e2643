"""A module whose collection depends on the rank: under torchrun the harness must refuse to start.

Run by tests/suites/multigpu/test_harness.py; not collected by the normal run.
"""

import os


def test_on_every_rank():
    pass


if os.environ.get("RANK") == "1":

    def test_only_on_rank_1():
        pass
