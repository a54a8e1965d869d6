"""The weight stages of a run, read back from the archive as ``WeightStage`` s: for every checkpoint
a stage made, its training numbers (checkpoint metrics) and the val evaluations of the harness it
trained under before and after it (the ``stage_effect`` evaluations: same tasks, same seeds)."""

from __future__ import annotations

from typing import Any

from coevo.evaluation.results import EvalResult
from coevo.meta.state import EvalSummary, WeightStage
from coevo.records import Checkpoint, EvaluationRecord
from coevo.storage import Archive


def _summary(record: Any) -> EvalSummary:
    return EvalSummary.of(EvalResult.model_validate(record.aggregates))


def weight_stages(archive: Archive, run_id: str) -> list[WeightStage]:
    """Every checkpoint of run ``run_id`` trained under a recorded incumbent (``config["incumbent_id"]``,
    set by ``coevo.training.stage.StageTrainer``), oldest first, as a ``WeightStage`` (``round``: its
    position) whose ``before``/``after`` are the latest finished val evaluations of that incumbent
    under the parent and under the checkpoint, when both exist on the same seeds and tasks."""
    val: dict[tuple[str, str], Any] = {}
    for e in sorted(archive.list(EvaluationRecord, run_id=run_id), key=lambda e: e.created_at):
        if e.split == "val" and e.aggregates:
            val[(e.harness_id, e.checkpoint_id)] = e
    stages = []
    for c in sorted(archive.list(Checkpoint, run_id=run_id), key=lambda c: c.created_at):
        harness = (c.config or {}).get("incumbent_id")
        if not harness or not c.parents:
            continue
        m = c.metrics or {}
        before, after = val.get((harness, c.parents[0])), val.get((harness, c.id))
        paired = before is not None and after is not None and (before.seeds, before.task_ids) == (after.seeds,
                                                                                                 after.task_ids)
        stages.append(WeightStage(
            round=len(stages), harness_id=harness, checkpoint_before=c.parents[0], checkpoint_after=c.id,
            steps=m.get("steps"), train_reward=m.get("reward_mean"), effective_group_rate=m.get("effective_group_rate"),
            contrast_rate=m.get("nonzero_std_rate"), rescue_rate=m.get("rescue_rate"),
            resampled_groups=m.get("resampled_groups"), delta_norm=m.get("delta_norm"),
            total_delta_norm=m.get("total_delta_norm"),
            before=_summary(before) if paired else None, after=_summary(after) if paired else None))
    return stages
