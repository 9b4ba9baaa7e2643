import signal
import sys

from .cli import main

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends quietly
sys.exit(main())
