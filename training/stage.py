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
    """The weight stage behind ``MetaContext.trainer``: GRPO (Harness-S §7) or RSFT (WHALE §3.1)
    from ``coevo.training`` on the run's train tasks, run in a worker thread."""

    def __init__(self, config: RunConfig, env: Env, archive: Any, run_id: str) -> None:
        self.config, self.env, self.archive, self.run_id = config, env, archive, run_id

    def _stage_config(self, round: int) -> dict[str, Any]:
        t = self.config.train
        # One row per micro-step with activation checkpointing: long prompts (few-shot turns with
        # function docs) otherwise hold batch x layers x seq^2 attention activations (OOM at 24 GiB).
        return {"steps": t.steps, "tasks_per_step": t.tasks_per_step, "num_generations": t.num_generations,
                "micro_batches": t.tasks_per_step * t.num_generations, "activation_checkpointing": True,
                "learning_rate": t.learning_rate, "lora_r": t.lora_r, "lora_alpha": t.lora_alpha,
                "seed": self.config.seed + 1000 * round, "output_dir": str(Path(self.config.out_dir) / "adapters")}

    def _train(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int) -> tuple[str, list[Trajectory]]:
        from coevo.training.checkpoint import Checkpoint

        rec = self.archive.get_checkpoint(checkpoint_id)
        ckpt = Checkpoint(**{k: v for k, v in rec.model_dump().items() if k in Checkpoint.model_fields})
        t = self.config.train  # training samples at its own temperature and output budget
        spec = spec.model_copy(update={"decoding": spec.decoding.model_copy(update={"temperature": t.temperature}),
                                       "budget": spec.budget.model_copy(update={"max_output_tokens": t.max_new_tokens})})
        if self.config.train.algorithm == "rsft":
            from coevo.training.rsft import train_rsft

            common = self._stage_config(round)
            rsft = {"rounds": common.pop("steps"), "tasks_per_round": common.pop("tasks_per_step"),
                    "samples_per_task": common.pop("num_generations"), "threshold": self.config.train.rsft_threshold, **common}
            new, trajectories = train_rsft(ckpt, spec, self.env, tasks, rsft, archive=self.archive, run_id=self.run_id)
        else:
            from coevo.training.grpo import train_grpo

            new, trajectories = train_grpo(ckpt, spec, self.env, tasks, self._stage_config(round), archive=self.archive,
                                           run_id=self.run_id)
        return new.id, trajectories

    async def __call__(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int) -> tuple[str, list[Trajectory]]:
        return await asyncio.to_thread(self._train, checkpoint_id, spec, tasks, round)
