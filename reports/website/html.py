"""The site's one way to write HTML: escaped text, tables, links and the page around them.

Text is escaped unless it is ``Markup`` (HTML this package wrote itself), so
a test id or a reason holding ``<`` never breaks a page.
"""

from __future__ import annotations

import html
import re
from typing import Any, Mapping, Sequence

SITE_NAME = "ddp-conformance nightly"


class Markup(str):
    """HTML written by this package: placed as it is."""


def esc(value: Any) -> str:
    return value if isinstance(value, Markup) else html.escape(str(value), quote=True)


def tag(name: str, content: Any = "", **attrs: Any) -> Markup:
    """``<name attrs>content</name>``; ``class_`` for class, ``data_run`` for data-run; None drops it."""
    shown = "".join(f' {key.rstrip("_").replace("_", "-")}="{esc(value)}"' for key, value in attrs.items()
                    if value is not None)
    return Markup(f"<{name}{shown}>{esc(content)}</{name}>")


def join(parts: Sequence[Any], sep: str = "") -> Markup:
    return Markup(sep.join(esc(p) for p in parts))


def link(href: str, text: Any, **attrs: Any) -> Markup:
    return tag("a", text, href=href, **attrs)


def slug(text: str) -> str:
    """A name fit for an id or a file: lower-case letters, digits and hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def table(rows: Sequence[Mapping[str, Any]] | Sequence[Sequence[Any]], headers: Sequence[str] | None = None,
          class_: str | None = None, row_classes: Sequence[str | None] | None = None) -> Markup:
    """A table in a horizontally scrolling box (wide tables stay readable on a phone); ``rows`` are dicts
    (their keys the headers) or sequences with ``headers``."""
    if not rows:
        return Markup("<p>(none)</p>")
    if headers is None:
        headers = list(rows[0].keys())  # type: ignore[union-attr]
    head = join([tag("th", h, scope="col") for h in headers])
    body = []
    for i, row in enumerate(rows):
        cells = [row.get(h, "") for h in headers] if isinstance(row, Mapping) else list(row)
        body.append(tag("tr", join([tag("td", c) for c in cells]),
                        class_=row_classes[i] if row_classes else None))
    inner = join([tag("thead", tag("tr", head)), tag("tbody", join(body))])
    return tag("div", tag("table", inner, class_=class_), class_="scroll")


def up(depth: int) -> str:
    """The way back to the site's root from a page ``depth`` folders down."""
    return "../" * depth


def page(title: str, body: Any, depth: int, built: str) -> str:
    """A whole page: its styles and script from the site's own folder (no network), navigation, a footer."""
    root = up(depth)
    nav = join([link(f"{root}index.html", "Latest run"), link(f"{root}history/index.html", "History"),
                link(f"{root}runs.html", "All runs")], " ")
    return ("<!doctype html>\n" + tag("html", join([
        tag("head", join([
            Markup('<meta charset="utf-8">'),
            Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
            tag("title", f"{title} · {SITE_NAME}"),
            Markup(f'<link rel="icon" href="{root}favicon.svg" type="image/svg+xml">'),
            Markup(f'<link rel="stylesheet" href="{root}site.css">'),
            Markup(f'<script src="{root}site.js" defer></script>'),
        ])),
        tag("body", join([
            tag("header", join([tag("span", SITE_NAME, class_="site"), tag("nav", nav)])),
            tag("main", body),
            tag("footer", f"Built {built} by python -m reports.website from the runs' results alone."),
            tag("div", "", id="tip", role="tooltip", hidden="hidden"),
        ])),
    ]), lang="en") + "\n")
