"""The weight stages of a run, read back from the archive: for every checkpoint a stage made, its
training numbers (checkpoint metrics) and the val score of the harness it trained under before and
after it (the ``stage_effect`` evaluations: same tasks, same seeds)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from coevo.storage import Archive


class StageRow(BaseModel):
    """One weight stage as the archive holds it (``None``: not recorded)."""

    checkpoint: str
    parent: str
    harness_id: str
    train_reward: float | None = None
    effective_group_rate: float | None = None
    contrast_rate: float | None = None
    delta_norm: float | None = None
    total_delta_norm: float | None = None
    val_before: float | None = None
    val_after: float | None = None
    n_val: int | None = None


def weight_stages(archive: Archive, run_id: str) -> list[StageRow]:
    """Every checkpoint of run ``run_id`` trained under a recorded incumbent (``config["incumbent_id"]``,
    set by ``coevo.training.stage.StageTrainer``), oldest first, with the val scores of that
    incumbent under its parent and under it (the latest finished evaluation of each pair on the same
    seeds and tasks; None when ``stage_effect`` did not run)."""
    val: dict[tuple[str, str], Any] = {}
    for e in sorted(archive.list_evaluations(run_id), key=lambda e: e.created_at):
        if e.split == "val" and e.aggregates:
            val[(e.harness_id, e.checkpoint_id)] = e
    rows = []
    for c in sorted(archive.list_checkpoints(run_id), key=lambda c: c.created_at):
        harness = (c.config or {}).get("incumbent_id")
        if not harness or not c.parents:
            continue
        m = c.metrics or {}
        before, after = val.get((harness, c.parents[0])), val.get((harness, c.id))
        paired = before is not None and after is not None and (before.seeds, before.task_ids) == (after.seeds,
                                                                                                 after.task_ids)
        rows.append(StageRow(checkpoint=c.id, parent=c.parents[0], harness_id=harness,
                             train_reward=m.get("reward_mean"),
                             effective_group_rate=m.get("effective_group_rate"),
                             contrast_rate=m.get("nonzero_std_rate"), delta_norm=m.get("delta_norm"),
                             total_delta_norm=m.get("total_delta_norm"),
                             val_before=before.aggregates.get("mean_reward") if paired else None,
                             val_after=after.aggregates.get("mean_reward") if paired else None,
                             n_val=len(after.task_ids) if paired else None))
    return rows
