"""One ``coevo decompose`` of a run: which evaluations fill the 2×2 of (H0, H_final) × (W0, W_final)."""

from __future__ import annotations

from pydantic import BaseModel

from coevo.records.fields import created
from coevo.timestamps import UTCTime


class Decomposition(BaseModel):
    """The 2×2 of a run's start and final harnesses under its start and final weights, on one split of
    one env with the same tasks and seeds: ``cells`` maps each cell (``coevo.evaluation.decompose.CELLS``:
    ``h0_w0``, ``h0_wf``, ``hf_w0``, ``hf_wf``) to the id of its stored ``EvaluationRecord``;
    ``harnesses`` and ``checkpoints`` name H0/H_final and W0/W_final (keys ``start``, ``final``); ``k``
    rollouts per task. The effects are computed from those evaluations' per-task outcomes when read
    (``coevo.evaluation.decompose.effects``), so the record never holds a number of its own.
    ``id``: a digest of (run, env, split, k, the cells' evaluation ids): the same decomposition asked
    again is the same record."""

    id: str
    run_id: str | None = None
    env: str
    split: str
    k: int
    harnesses: dict[str, str]
    checkpoints: dict[str, str]
    cells: dict[str, str]
    created_at: UTCTime = created()
