"""One step of ``git bisect run`` (``python -P -m reports.bisect.step PLAN``): the commit git checked out, in the
current folder, against the good one; exits 0 (the same), 1 (moved), 125 (cannot tell, or cannot run: skipped) or
128 (the good commit cannot be measured: the search stops)."""

import sys
from pathlib import Path

from .search import step

if __name__ == "__main__":
    sys.exit(step(Path(sys.argv[1])))
