"""A run's verdict in a box: the word, a symbol and a colour (never the colour alone), and each line that
decided it, marked."""

from __future__ import annotations

from ..store.model import Results
from ..views.run import STATUS_MARKS, line_words, verdict_view
from .html import Markup, join, tag


def verdict_html(results: Results) -> Markup:
    view = verdict_view(results)
    said = view.title + (f" ({view.note})" if view.note else "")
    if view.word is None:
        return tag("div", tag("p", said + "."), class_="verdict verdict-none")
    lines = [tag("li", join([tag("span", STATUS_MARKS[line.status] + " ", aria_hidden="true"), line_words(line)]),
                 class_="fails" if line.fails else "not-applicable" if line.status == "not applicable" else None)
             for line in view.lines]
    covers = [tag("p", view.covers, class_="covers")] if view.covers else []
    return tag("div", join([tag("p", f"{view.symbol} {said}", class_="word"), *covers, tag("ul", join(lines))]),
               class_=f"verdict verdict-{view.word.lower()}")
