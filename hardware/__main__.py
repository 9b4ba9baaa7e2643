import sys

from .probe import main

sys.exit(main())
