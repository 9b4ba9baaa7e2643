"""What every command of the project does with its command line: each argument typed and checked as it is read,
and a bad one refused in one line (the argument, the value, what is valid) with exit 2, before any work starts.

``Parser`` is the commands' parser; ``Count``, ``Real``, ``OutFolder``,
``KeyNumber`` are argument types (``Arg``) that say what they accept (the
floors above add their own: a run folder, a world size). ``tests/test_commands.py`` reads every command's parser and
feeds each typed argument the values its kind refuses.
"""

from .arguments import Arg, Count, KeyNumber, OutFolder, Parser, Real, cannot_write, interruptible

__all__ = ["Arg", "Count", "KeyNumber", "OutFolder", "Parser", "Real", "cannot_write", "interruptible"]
