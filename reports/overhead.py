"""Padding overhead of real models under each policy, beside the design notes' figures: ``python -m reports.overhead``.

What is computed and how: ``benchmarks.padding``.
"""

from __future__ import annotations

import json
from typing import Sequence

from benchmarks.measuring.padding import overhead_table
from benchmarks.padding import NOTES_CLAIMS
from cli import Parser
from datamodel import to_json

from .render.padding import render_markdown


def parser() -> Parser:
    p = Parser(prog="python -m reports.overhead", description=__doc__)
    p.add_argument("--json", action="store_true")
    p.add_argument("--notes-rows-only", action="store_true", help="only the (model, dp) pairs the design notes' "
                   "table lists")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    rows = overhead_table()
    if args.notes_rows_only:
        rows = [r for r in rows if (r.model, r.dp) in NOTES_CLAIMS]
    print(json.dumps(to_json(rows), indent=2) if args.json else render_markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
