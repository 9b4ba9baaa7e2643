from cli import interruptible

from .nightly.job import main

raise SystemExit(interruptible(main, "stopped before the run was written; the runs already written are untouched"))
