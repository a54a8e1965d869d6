"""The weight stage of a meta-loop round: GRPO (Harness-S §7) or RSFT (WHALE §3.1) on the run's
train tasks, as ``MetaContext.trainer`` calls it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from coevo.config import RunConfig, TrainConfig
from coevo.envs.base import Env, Task
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import Trajectory
from coevo.training.checkpoint import Checkpoint, record_checkpoint

Route = Callable[[Task, int], Awaitable[list[str]]]
"""A router's rescue choice: ``route(task, k)`` -> at most k distinct sibling harness ids (Harness-S Eq. 10)."""


def training_spec(spec: HarnessSpec, train: TrainConfig) -> HarnessSpec:
    """``spec`` as training rollouts run it: sampled at ``train.temperature`` with
    ``train.max_new_tokens`` output tokens per model call, whatever its own decoding and budget say
    (a new spec id; everything else unchanged)."""
    return spec.model_copy(update={
        "decoding": spec.decoding.model_copy(update={"temperature": train.temperature}),
        "budget": spec.budget.model_copy(update={"max_output_tokens": train.max_new_tokens})})


def measured(new: Checkpoint, parent: Checkpoint, incumbent_id: str) -> Checkpoint:
    """``new`` with the size of its LoRA change in its metrics (``delta_norm``: from ``parent``,
    the stage's own change; ``total_delta_norm``: from the base model; ``coevo.training.delta``) and
    the incumbent harness it trained under in its config (``incumbent_id``; ``harness_id`` names
    the training variant of it, see ``training_spec``)."""
    from coevo.training.delta import delta_norm

    metrics = {**new.metrics, "delta_norm": delta_norm(new, parent), "total_delta_norm": delta_norm(new)}
    return new.model_copy(update={"metrics": metrics, "config": {**new.config, "incumbent_id": incumbent_id}})


class StageTrainer:
    """The weight stage behind ``MetaContext.trainer``: ``train_grpo`` (Harness-S §7) or
    ``train_rsft`` (WHALE §3.1), as ``config.train.algorithm`` says, on the given train tasks with
    the round's ``config.train.stage(...)``, run in a worker thread.

    Training rollouts sample as ``training_spec`` says. With ``config.train.rescue`` (GRPO only)
    and siblings, an all-fail group is re-rolled once under each sibling harness (Harness-S Eq. 5,
    ``coevo.training.rollout.sibling_rescue``; siblings cycled to the group size, sampled like
    the incumbent). With a ``route(task, k) -> harness ids`` (Harness-S Eq. 10: the router's top-K
    siblings of that task, H0 excluded) rescue is on whatever ``train.rescue`` says, and each task's
    rescue group runs under the siblings the router chose for it.
    Adapters are saved under the absolute ``<out_dir>/adapters`` and stored with
    that path. The new checkpoint's metrics get the size of its change (``measured``).
    """

    def __init__(self, config: RunConfig, env: Env, archive: Any, run_id: str) -> None:
        self.config, self.env, self.archive, self.run_id = config, env, archive, run_id

    def _train(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int,
               siblings: Sequence[HarnessSpec], route: Route | None = None) -> tuple[str, list[Trajectory]]:
        train = self.config.train
        checkpoint = self.archive.get_checkpoint(checkpoint_id)
        if checkpoint is None:
            raise KeyError(f"checkpoint {checkpoint_id!r} is not in the archive")
        # absolute: the checkpoint's stored adapter_path must not depend on where a resume is started from
        config = train.stage(round, self.config.seed, Path(self.config.out_dir).expanduser().resolve())
        options: dict[str, Any] = {}
        if train.algorithm == "rsft":
            from coevo.training.rsft import train_rsft as stage
        else:
            from coevo.training.grpo import train_grpo as stage
            from coevo.training.rollout import sibling_rescue

            variants = {s.id: training_spec(s, train) for s in siblings}
            if route is not None and variants:
                async def choose(task: Task, k: int) -> list[HarnessSpec]:
                    return [variants[h] for h in await route(task, k) if h in variants]

                options["rescue"] = sibling_rescue(choose, self.env, seed=config.seed)
            elif train.rescue and siblings:
                options["rescue"] = sibling_rescue(list(variants.values()), self.env, seed=config.seed)
        new, trajectories = stage(checkpoint, training_spec(spec, train), self.env, tasks, config,
                                  archive=self.archive, run_id=self.run_id, **options)
        new = measured(new, checkpoint, spec.id)
        record_checkpoint(self.archive, new)
        return new.id, trajectories

    async def __call__(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int,
                       siblings: Sequence[HarnessSpec] = (),
                       route: Route | None = None) -> tuple[str, list[Trajectory]]:
        """Train from ``checkpoint_id`` under ``spec`` on ``tasks`` in round ``round`` (``siblings``:
        the Eq. 5 rescue pool, best first; ``route``: the router's per-task choice among them);
        returns the new checkpoint's id (recorded in the archive) and every training rollout."""
        return await asyncio.to_thread(self._train, checkpoint_id, spec, tasks, round, siblings, route)
