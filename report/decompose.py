"""The 2×2 of ``coevo decompose`` in words and HTML: each cell with n and its interval, each lever's
effect under the other lever's start and final value, and their interaction (``coevo.evaluation.decompose``)."""

from __future__ import annotations

import html
from typing import Any, Iterator

from coevo.evaluation.decompose import CELLS, EFFECTS, Effects, effects
from coevo.records import Decomposition, EvaluationRecord
from coevo.report.numbers import difference_text, score_text

CELL_NAMES = {"h0_w0": "H0 × W0 (start pair)", "h0_wf": "H0 × W_final", "hf_w0": "H_final × W0",
              "hf_wf": "H_final × W_final (final pair)"}
"""How each cell is named in a table."""


def effect_rows(numbers: Effects) -> list[tuple[str, str]]:
    """(what, paired difference text) for each simple effect, the interaction and the total."""
    rows = [(what, difference_text(numbers.effects[name])) for name, (_, _, what) in EFFECTS.items()]
    rows.append(("interaction: (H_final×W_final − H0×W_final) − (H_final×W0 − H0×W0)",
                 difference_text(numbers.interaction)))
    rows.append(("total: H_final×W_final − H0×W0", difference_text(numbers.total)))
    return rows


def stored_effects(archive: Any, record: Decomposition) -> Effects | None:
    """The ``Effects`` of a stored decomposition from its four evaluations' stored per-task outcomes
    (``archive``: a ``coevo.storage.Archive``); None when one of them is missing or unfinished."""
    from coevo.evaluation.results import TaskOutcome

    per_task = {}
    for cell, eval_id in record.cells.items():
        found = archive.get(EvaluationRecord, eval_id)
        if found is None or not found.aggregates:
            return None
        per_task[cell] = {t: TaskOutcome.model_validate(o) for t, o in found.aggregates.get("per_task", {}).items()}
    return effects(per_task)


def stored_decompositions(archive: Any, run_id: str) -> Iterator[tuple[Decomposition, Effects]]:
    """Run ``run_id``'s stored decompositions with their ``Effects``, newest first, leaving out any
    whose four evaluations are not all finished (``stored_effects``)."""
    for record in sorted(archive.list(Decomposition, run_id=run_id), key=lambda r: r.created_at, reverse=True):
        if (numbers := stored_effects(archive, record)) is not None:
            yield record, numbers


def newest_effects(archive: Any, run_id: str) -> Effects | None:
    """The ``Effects`` of run ``run_id``'s newest finished decomposition; None when it has none."""
    return next((numbers for _, numbers in stored_decompositions(archive, run_id)), None)


def decompose_section(archive: Any, run_id: str) -> str:
    """The report's "Which lever did what" section: every stored decomposition of run ``run_id``, newest
    first, as a 2×2 table and its effects; ``""`` when the run has none (``coevo decompose RUN`` makes one)."""
    parts = []
    for record, numbers in stored_decompositions(archive, run_id):
        cell = {c: score_text(numbers.cells[c]) for c in CELLS}
        h0, hf = record.harnesses["start"][:12], record.harnesses["final"][:12]
        grid = ("<table><tr><th></th><th>W0</th><th>W_final</th></tr>"
                f"<tr><th>H0 ({h0})</th><td>{cell['h0_w0']}</td><td>{cell['h0_wf']}</td></tr>"
                f"<tr><th>H_final ({hf})</th><td>{cell['hf_w0']}</td><td>{cell['hf_wf']}</td></tr></table>")
        rows = "".join(f"<tr><td>{html.escape(what)}</td><td>{html.escape(text)}</td></tr>"
                       for what, text in effect_rows(numbers))
        parts.append(f"<h3>{html.escape(record.env)}/{record.split}, k = {record.k}, {numbers.n} tasks "
                     f"(W0 {html.escape(record.checkpoints['start'][:12])}, W_final "
                     f"{html.escape(record.checkpoints['final'][:12])})</h3>{grid}"
                     f"<table><tr><th>effect (paired per task)</th><th>mean [95 % interval] n</th></tr>{rows}</table>")
    if not parts:
        return ""
    return ("<h2>Which lever did what (coevo decompose)</h2><p>The start and final harnesses under the start and "
            "final weights, on the same tasks and seeds. A harness effect holds the weights fixed, a weight effect "
            "the harness; the interaction is how much one lever's effect depends on the other.</p>" + "".join(parts))
