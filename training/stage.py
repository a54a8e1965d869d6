"""The weight stage of a meta-loop round: GRPO (Harness-S §7) or RSFT (WHALE §3.1) on the run's
train tasks, as ``MetaContext.trainer`` calls it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Sequence

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import Trajectory


class StageTrainer:
    """The weight stage behind ``MetaContext.trainer``: ``train_grpo`` (Harness-S §7) or
    ``train_rsft`` (WHALE §3.1), as ``config.train.algorithm`` says, on the run's train tasks with
    the round's ``config.train.stage(...)``, run in a worker thread.

    Training rollouts sample at ``config.train.temperature`` with ``config.train.max_new_tokens``
    output tokens per model call, whatever the harness's own decoding and budget say. Adapters are
    saved under the absolute ``<out_dir>/adapters`` and stored with that path.
    """

    def __init__(self, config: RunConfig, env: Env, archive: Any, run_id: str) -> None:
        self.config, self.env, self.archive, self.run_id = config, env, archive, run_id

    def _train(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task],
               round: int) -> tuple[str, list[Trajectory]]:
        train = self.config.train
        if train.algorithm == "rsft":
            from coevo.training.rsft import train_rsft as stage
        else:
            from coevo.training.grpo import train_grpo as stage
        checkpoint = self.archive.get_checkpoint(checkpoint_id)
        if checkpoint is None:
            raise KeyError(f"checkpoint {checkpoint_id!r} is not in the archive")
        spec = spec.model_copy(update={
            "decoding": spec.decoding.model_copy(update={"temperature": train.temperature}),
            "budget": spec.budget.model_copy(update={"max_output_tokens": train.max_new_tokens})})
        # absolute: the checkpoint's stored adapter_path must not depend on where a resume is started from
        config = train.stage(round, self.config.seed, Path(self.config.out_dir).expanduser().resolve())
        new, trajectories = stage(checkpoint, spec, self.env, tasks, config, archive=self.archive, run_id=self.run_id)
        return new.id, trajectories

    async def __call__(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task],
                       round: int) -> tuple[str, list[Trajectory]]:
        """Train from ``checkpoint_id`` under ``spec`` on ``tasks`` in round ``round``; returns the
        new checkpoint's id (recorded in the archive) and every training rollout."""
        return await asyncio.to_thread(self._train, checkpoint_id, spec, tasks, round)
