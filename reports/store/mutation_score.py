"""The mutation score as the mutation tool (``python -m mutation``) last wrote it, read into the model.

The job never runs mutants: it reads ``SCORE_FILE`` when a run is made and keeps the score in that run's
results, so the report says what the score was then.
"""

from __future__ import annotations

import json
from pathlib import Path

from datamodel import DecodeError, from_json

from .model import MutationScore

SCORE_FILE = Path(__file__).resolve().parents[2] / "mutation" / "score.json"
FORMAT = 2


def read_score(path: Path = SCORE_FILE) -> MutationScore | None:
    """The last measured score; None when it was never measured."""
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: got format {data.get('format')!r}, but should be {FORMAT}: rerun python -m mutation")
    try:
        return from_json(MutationScore, data)
    except DecodeError as exc:
        raise ValueError(f"{path}: {exc}: rerun python -m mutation") from exc
