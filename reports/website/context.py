"""What every page of one site knows: when it was built, which runs have a page, and which setups a history
page; so a link is written only where its target is."""

from __future__ import annotations

from dataclasses import dataclass

from ..store.model import Setup
from .html import Markup, esc, link, slug, up


@dataclass(frozen=True)
class Context:
    built: str
    kept: frozenset[str]
    """The runs with a page of their own."""
    setups: dict[Setup, str]
    """setup -> its history page's file name under history/ (smoke setups have none)."""

    def run_href(self, depth: int) -> str:
        """A run's page from a page ``depth`` folders down, with ``{run}`` for its name."""
        return f"{up(depth)}runs/{{run}}/index.html"

    def run_link(self, name: str, depth: int, anchor: str = "") -> Markup:
        if name in self.kept:
            return link(self.run_href(depth).format(run=name) + anchor, name)
        return Markup(f"{esc(name)} (not kept in the site)")

    def setup_link(self, setup: Setup, depth: int) -> Markup:
        page = self.setups.get(setup)
        return link(f"{up(depth)}history/{page}", setup.label()) if page else Markup(esc(setup.label()))


def setup_page_name(label: str, taken: set[str]) -> str:
    """A file name for a setup's history page, readable and unique."""
    base = slug(label)[:80]
    name, n = f"{base}.html", 1
    while name in taken:
        n += 1
        name = f"{base}-{n}.html"
    return name
