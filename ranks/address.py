"""Check functions travel between processes by name, so each rank imports and calls its own copy.

Only a function reachable as ``module.qualname`` can be found again in another
process; anything else (a lambda, a nested function) is refused up front, in
both launch modes, so a test that passes under torchrun also runs in the pool.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple


class Address(NamedTuple):
    module: str
    qualname: str

    def __str__(self) -> str:
        return f"{self.module}.{self.qualname}"


def address_of(fn: Callable[..., Any]) -> Address:
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not callable(fn) or not module or not qualname:
        raise TypeError(f"ranks.run: got {fn!r}, but should be a module-level function")
    address = Address(module, qualname)
    if module == "__main__" or "<" in qualname or _find(address) is not fn:
        raise TypeError(
            f"ranks.run: got {address}, but should be a module-level function of an importable "
            "module, so that every rank can import it by name"
        )
    return address


def resolve(address: Address) -> Callable[..., Any]:
    """The function at ``address``, importing its module if this process has not yet."""
    target: Any = importlib.import_module(address.module)
    for part in address.qualname.split("."):
        target = getattr(target, part)
    return target


def _find(address: Address) -> Any:
    try:
        return resolve(address)
    except (ImportError, AttributeError):
        return None
