"""Which commit moved a figure: ``python -m reports.bisect`` (``__main__.py``) measures commits in worktrees of
their own (``measure.py``), judges each against the good commit three ways (``decide.py``: moved, same, unknown),
and lets ``git bisect run`` drive the search (``search.py``; ``step.py`` is its step)."""
