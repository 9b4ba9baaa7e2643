"""What the commands share on their command lines: ``KEY=NUMBER`` arguments."""

from __future__ import annotations

import argparse
import sys
from typing import Callable


def key_number(text: str, form: str, split_at_last: bool = False) -> tuple[str, float]:
    """``KEY=NUMBER`` as (key, number); ``form`` says what is valid in the error (e.g. 'PREFIX=FRACTION, e.g.
    busbw=0.15'). ``split_at_last``: the key may hold '=' itself."""
    key, sep, value = text.rpartition("=") if split_at_last else text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not sep or not key or not number >= 0:
        raise argparse.ArgumentTypeError(f"got {text!r}, but should be {form}")
    return key, number


def interruptible(main: Callable[[], int], lost: str) -> int:
    """``main()``, with Ctrl-C ending it in one line (exit 130) that says what was ``lost``, not a traceback."""
    try:
        return main()
    except KeyboardInterrupt:
        print(f"interrupted: {lost}", file=sys.stderr)
        return 130
