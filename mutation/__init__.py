"""Mutation score of the checks over the reference: ``python -m mutation``.

cosmic-ray mutates one spot of ``reference/`` at a time and runs, against each
mutant, the checks that can reach its module (``checks``); a mutant that
passes them all *survived*. A session (``session``) chooses the mutants
(``population``: every one of a module, or a seeded sample), runs them in
resumable chunks (``sitting``, ``runner``) and ends in a score by population
(``score``), written to ``mutation/score.json``, which the report reads.

Needs ``pip install -r requirements-mutation.txt``; not run in CI.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
