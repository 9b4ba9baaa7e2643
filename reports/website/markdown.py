"""report.md as HTML: markdown-it (CommonMark with GitHub's tables), headings moved down under the run page's
own and given GitHub's ids (so the report's own ``#anchor`` links land), tables in scrolling boxes."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from .html import Markup

_PARSER = MarkdownIt("commonmark", {"html": False}).enable("table")


def github_id(text: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")


def keep_images(text: str, images: set[str]) -> str:
    """The markdown with every image that is not among ``images`` said in words instead of left broken."""
    return IMAGE.sub(lambda m: m.group(0) if m.group(2) in images else f"({m.group(2)}: not in the site)",
                     text)


def markdown_html(text: str, shift: int = 1) -> Markup:
    tokens = _PARSER.parse(text)
    seen: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + shift)}"
        if token.type == "heading_open":
            base = github_id(tokens[i + 1].content)
            count = seen.get(base, 0)
            seen[base] = count + 1
            token.attrSet("id", base if count == 0 else f"{base}-{count}")
    rendered = _PARSER.renderer.render(tokens, _PARSER.options, {})
    boxed = rendered.replace("<table>", '<div class="scroll"><table>').replace("</table>", "</table></div>")
    return Markup(boxed)
