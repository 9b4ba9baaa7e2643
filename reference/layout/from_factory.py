"""A user's ``pkg.mod:factory`` called with no arguments on the meta device, to plan the module it returns.

The current directory is importable, as ``python -m`` makes it. Whatever goes
wrong in the user's code comes back as one line naming the module, the
attribute or the exception, never as a traceback through this package.
"""

from __future__ import annotations

import importlib
import os
import sys

import torch


def build_from_factory(target: str) -> tuple[str, torch.nn.Module]:
    """A label and the ``torch.nn.Module`` that ``target`` (``module:callable``) returns, built on meta."""
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise ValueError(f"--module: got {target!r}, but should be 'package.module:factory'")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name and module_name.startswith(exc.name):
            raise ValueError(f"--module: cannot import the module {module_name!r} ({exc}); it should be "
                             f"importable from the current directory {os.getcwd()} or the Python path"
                             ) from None
        raise ValueError(f"--module: importing {module_name!r} failed ({type(exc).__name__}: {exc})"
                         ) from None
    factory = module
    for part in attribute.split("."):
        if not hasattr(factory, part):
            callables = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
            raise ValueError(f"--module: module {module_name!r} has no attribute {attribute!r} "
                             f"(its callables: {', '.join(callables) or 'none'})")
        factory = getattr(factory, part)
    if not callable(factory):
        raise ValueError(f"--module: {target} is of type {type(factory).__name__}, but should be a callable "
                         "that takes no arguments and returns a torch.nn.Module")
    with torch.device("meta"):
        try:
            model = factory()
        except Exception as exc:
            raise ValueError(f"--module: {target}() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"--module: {target}() returned an object of type "
                         f"{type(model).__module__}.{type(model).__qualname__}, "
                         "but should return a torch.nn.Module")
    return target, model
