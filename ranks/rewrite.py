"""Pool workers import test modules themselves; rewrite their asserts as pytest did in the parent.

Without this a bare ``assert a == b`` in a check reads ``AssertionError`` with
no values in the pool but shows both values under torchrun. The parent names
the modules pytest rewrote; a worker rewrites exactly those when it imports
them. If pytest's rewriter ever moves, workers fall back to plain imports.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

try:
    from _pytest.assertion.rewrite import AssertionRewritingHook, rewrite_asserts
except ImportError:  # pragma: no cover - pytest internals moved
    AssertionRewritingHook = rewrite_asserts = None


def rewritten_modules() -> frozenset[str]:
    """Names of the modules pytest imported with assertion rewriting in this process."""
    if AssertionRewritingHook is None:
        return frozenset()
    return frozenset(
        name
        for name, module in list(sys.modules.items())
        if isinstance(getattr(getattr(module, "__spec__", None), "loader", None), AssertionRewritingHook)
    )


class _RewritingFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def find_spec(self, name, path, target=None):
        if name not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        spec.loader = self
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module: ModuleType) -> None:
        origin = module.__spec__.origin
        with open(origin, "rb") as file:
            source = file.read()
        tree = ast.parse(source, filename=origin)
        rewrite_asserts(tree, source, origin)
        exec(compile(tree, origin, "exec", dont_inherit=True), module.__dict__)  # noqa: S102 - a module's body


_finder = _RewritingFinder()


def rewrite_on_import(names: frozenset[str]) -> None:
    """From now on, import the modules called ``names`` with pytest's assertion rewriting."""
    if rewrite_asserts is None:
        return
    _finder.names.update(names)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
