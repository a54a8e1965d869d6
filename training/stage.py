"""The weight stage of a meta-loop round as ``MetaContext.trainer`` calls it: the run's ``StageTrainer``
resolves the start checkpoint and the round's stage config and runs the stage kind the family chose
(``coevo.training.kinds``: GRPO, Harness-S §7, or RSFT, WHALE §3.1, as ``train.algorithm`` says; the
families' own kinds beside them)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Sequence

from coevo.config import RunConfig
from coevo.config.train import StageConfig
from coevo.envs.base import Env, Task
from coevo.harnesses.spec import HarnessSpec
from coevo.models.checkpoint import Checkpoint
from coevo.models.trajectory import Trajectory
from coevo.observe.tracking import tracking_folder
from coevo.training.checkpoint import record_checkpoint
from coevo.training.kinds import Room, StageKind, configured
from coevo.training.memory import releasing


def tracked(stage: StageConfig, run: RunConfig, run_id: str, round: int) -> StageConfig:
    """``stage`` reporting to the run's tracker (``run.report_to``) unless ``train.report_to`` names
    one itself: TRL's ``report_to`` for GRPO, with TensorBoard steps under
    ``<out_dir>/tracking/<run_id>/trl/round<round>`` and the stage named ``<run_id>/round<round>``
    in MLflow and wandb (``coevo.observe.tracking``)."""
    if run.report_to == "none" or stage.report_to != "none":
        return stage
    folder = tracking_folder(run.out_dir, run_id) / "trl" / f"round{round}"
    return stage.model_copy(update={"report_to": run.report_to, "logging_dir": str(folder),
                                    "run_name": f"{run_id}/round{round}"})


class StageTrainer:
    """The weight stage behind ``MetaContext.trainer``: the stage ``kind`` a family chose
    (``coevo.training.kinds``; None: ``configured``, the algorithm ``config.train.algorithm`` names)
    from a checkpoint of the archive on the given train tasks with the round's
    ``config.train.stage(...)``, run in a worker thread.

    Adapters are saved under the absolute ``<out_dir>/adapters`` and stored with that path. The new
    checkpoint's metrics get the size of its change (``coevo.training.kinds.measured``) and the
    checkpoint is recorded in the archive. When the stage ends (or fails: the error keeps its message and
    lines, not the stage's local variables), the memory it freed goes back to the operating system
    (``coevo.training.memory.release_freed_memory``). With a run tracker, TRL logs the
    stage's steps to it (``tracked``). ``executor`` (the run's, ``coevo.evaluation.executors``; None: in
    process) is handed to the stage and its rescue: a server-backed sampler's groups run on its workers, while
    the default sampler, the trainer's live weights, samples in this process (``sampling_on``). Which
    rollouts a kind runs, under which harnesses, and what it publishes (GRPO on ``train.vllm``
    servers) is the kind's own (``GRPO``, ``RSFT``; Harness-S's ``Routed`` and ``Mixture``,
    EvoHarness-RL's ``HarnessSFT``).
    """

    def __init__(self, config: RunConfig, env: Env, archive: Any, run_id: str, executor: Any = None) -> None:
        self.config, self.env, self.archive, self.run_id = config, env, archive, run_id
        self.executor = executor

    def room(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int) -> Room:
        """The ``Room`` a stage from ``checkpoint_id`` runs in. Raises ``KeyError`` when the checkpoint
        is not in the archive."""
        checkpoint = self.archive.get(Checkpoint, checkpoint_id)
        if checkpoint is None:
            raise KeyError(f"checkpoint {checkpoint_id!r} is not in the archive")
        # absolute: the checkpoint's stored adapter_path must not depend on where a resume is started from
        stage = self.config.train.stage(round, self.config.seed, Path(self.config.out_dir).expanduser().resolve())
        return Room(config=self.config, env=self.env, archive=self.archive, run_id=self.run_id,
                    executor=self.executor, round=round, checkpoint=checkpoint, spec=spec, tasks=tasks,
                    stage=tracked(stage, self.config, self.run_id, round))

    def _train(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int,
               kind: StageKind | None) -> tuple[str, list[Trajectory]]:
        room = self.room(checkpoint_id, spec, tasks, round)
        # the stage's freed heap goes back to the OS, not held into the next round
        new, trajectories = releasing((kind if kind is not None else configured(self.config.train)).run)(room)
        record_checkpoint(self.archive, new)
        return new.id, trajectories

    async def __call__(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int,
                       kind: StageKind | None = None) -> tuple[str, list[Trajectory]]:
        """Train from ``checkpoint_id`` under ``spec`` on ``tasks`` in round ``round`` as the stage
        ``kind`` says (None: the configured algorithm's plain stage); returns the new checkpoint's id
        (recorded in the archive) and every training rollout. Raises ``KeyError`` for a checkpoint
        not in the archive."""
        return await asyncio.to_thread(self._train, checkpoint_id, spec, tasks, round, kind)
