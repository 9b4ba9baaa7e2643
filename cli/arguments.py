"""The commands' parser and argument types (``cli``)."""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, NoReturn


class Parser(argparse.ArgumentParser):
    """argparse's parser, refusing in one line: ``prog: argument --x: got 'v', but should be ...`` and exit 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {' '.join(message.split())}\n")


class Arg:
    """An argument type: ``arg(text)`` is the value, or an ``ArgumentTypeError`` saying what is valid."""

    kind: ClassVar[str]
    """What the argument is, for the tests that feed every kind the values it refuses."""

    def refuse(self, text: str, should: str) -> NoReturn:
        raise argparse.ArgumentTypeError(f"got {text!r}, but should be {should}")

    def __repr__(self) -> str:  # argparse names the type in some of its own messages
        return self.kind


class Count(Arg):
    """A whole number within bounds."""

    kind = "count"

    def __init__(self, minimum: int = 1, maximum: int | None = None, unit: str = "", why: str = "") -> None:
        self.minimum, self.maximum, self.unit, self.why = minimum, maximum, unit, why

    def valid(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        bound = f"from {self.minimum} to {self.maximum}" if self.maximum is not None else f"at least {self.minimum}"
        return f"a whole number{unit} {bound}" + (f" ({self.why})" if self.why else "")

    def __call__(self, text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            self.refuse(text, self.valid())
        if value < self.minimum or self.maximum is not None and value > self.maximum:
            self.refuse(text, self.valid())
        return value


class Real(Arg):
    """A finite number above (or from) a bound."""

    kind = "number"

    def __init__(self, above: float | None = 0.0, minimum: float | None = None, maximum: float | None = None,
                 unit: str = "") -> None:
        self.above, self.minimum, self.maximum, self.unit = above, minimum, maximum, unit

    def valid(self) -> str:
        unit = f" of {self.unit}" if self.unit else ""
        low = f"above {self.above:g}" if self.above is not None else f"at least {self.minimum:g}"
        high = f" and at most {self.maximum:g}" if self.maximum is not None else ""
        return f"a number{unit} {low}{high}"

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            self.refuse(text, self.valid())
        too_low = (self.above is not None and not value > self.above) or \
                  (self.minimum is not None and not value >= self.minimum)
        if not math.isfinite(value) or too_low or self.maximum is not None and value > self.maximum:
            self.refuse(text, self.valid())
        return value


def cannot_write(folder: Path) -> str | None:
    """Why nothing can be written into ``folder`` (which exists), or None: the one check, which tries, writing and
    removing a probe (permission bits say nothing to root, and /proc refuses root too)."""
    try:
        handle, probe = tempfile.mkstemp(prefix=".probe-", dir=folder)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(handle)
    os.unlink(probe)
    return None


class OutFolder(Arg):
    """A folder to write into: one that exists and can be written, or one that can be made there (its nearest
    existing parent a folder that can be written, tried with a probe that is removed at once)."""

    kind = "output folder"

    def __init__(self, what: str = "a folder to write into") -> None:
        self.what = what

    def __call__(self, text: str) -> Path:
        path = Path(text)
        if path.exists() and not path.is_dir():
            self.refuse(text, f"{self.what}, not a file")
        nearest = next((p for p in (path.absolute(), *path.absolute().parents) if p.exists()), None)
        why = "not a folder" if nearest is None or not nearest.is_dir() else cannot_write(nearest)
        if why:
            self.refuse(text, f"{self.what}: {nearest or path} cannot be written ({why})")
        return path


class KeyNumber(Arg):
    """``KEY=NUMBER``, the number at least 0 (above it, ``positive``; ``keys``: the keys it may take)."""

    kind = "key=number"

    def __init__(self, form: str, keys: tuple[str, ...] | None = None, split_at_last: bool = False,
                 maximum: float | None = None, positive: bool = False) -> None:
        self.form, self.keys, self.split_at_last, self.maximum = form, keys, split_at_last, maximum
        self.positive = positive

    def __call__(self, text: str) -> tuple[str, float]:
        key, sep, value = text.rpartition("=") if self.split_at_last else text.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        bad = not sep or not key or not number >= 0 or not math.isfinite(number) or self.positive and number == 0 or \
            (self.maximum is not None and number > self.maximum) or (self.keys is not None and key not in self.keys)
        if bad:
            self.refuse(text, self.form)
        return key, number


def interruptible(main: Callable[[], int], lost: str) -> int:
    """``main()``, with Ctrl-C ending it in one line (exit 130) that says what was ``lost``, not a traceback."""
    try:
        return main()
    except KeyboardInterrupt:
        print(f"interrupted: {lost}", file=sys.stderr)
        return 130
