"""Per-task pairing, one rule for every paired comparison (the gate's pairs, a paired difference, a
comparison's strategy − reference, a paper table's re-tests): two evaluations are paired on the tasks
both hold, in the first one's order; a task missing on either side is left out, never scored."""

from __future__ import annotations

from typing import Mapping


def paired_tasks(a: Mapping[str, object], b: Mapping[str, object]) -> list[str]:
    """The task ids of ``a`` that ``b`` holds too, in ``a``'s order (``a`` and ``b``: task id -> an
    outcome, e.g. an evaluation's ``per_task``)."""
    return [task_id for task_id in a if task_id in b]
