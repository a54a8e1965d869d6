"""The weight stage of a meta-loop round: GRPO (Harness-S §7) or RSFT (WHALE §3.1) on the run's
train tasks, as ``MetaContext.trainer`` calls it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from coevo.config import RunConfig, TrainConfig
from coevo.config.train import StageConfig
from coevo.envs.base import Env, Task
from coevo.harnesses.spec import HarnessSpec
from coevo.models.checkpoint import Checkpoint
from coevo.models.trajectory import Trajectory
from coevo.observe.tracking import tracking_folder
from coevo.training.checkpoint import record_checkpoint
from coevo.training.schedule import WeightPhase

Route = Callable[[Task, int], Awaitable[list[str]]]
"""A router's rescue choice: ``route(task, k)`` -> at most k distinct sibling harness ids (Harness-S Eq. 10)."""


@dataclass(frozen=True)
class StageOptions:
    """What a weight stage is given beyond its checkpoint, harness, tasks and round: ``siblings`` the
    Eq. 5 rescue pool (best first), ``route`` the router's per-task choice among them (Harness-S
    Eq. 10), ``phase`` a weight phase's place in the run's task stream and its length (WHALE §3.1),
    ``mixture`` the harness of each GRPO group position, cycled to the group size (Harness-S App. 8's
    fixed mixed-harness control; empty: every rollout under the stage's harness), ``experience`` the
    BPE harness lineage's lessons every rollout starts with (EvoHarness-RL;
    ``coevo.training.rollout.with_experience``, on an executor's workers too), ``harness_sft`` > 0
    makes the stage EvoHarness-RL's supervised harness fine-tuning instead: that many RSFT rounds
    whatever ``train.algorithm`` says (``evoharness.sft_epochs`` passes at ``evoharness.sft_learning_rate``
    when set), trained on the BPE-using turns of accepted rollouts only
    (``coevo.training.harness_cost.harness_sft_rows``), played by the scripted harness teacher when
    ``evoharness.teacher`` (``coevo.training.teacher.teacher_rollout``)."""

    siblings: Sequence[HarnessSpec] = ()
    route: Route | None = None
    phase: WeightPhase | None = None
    mixture: Sequence[HarnessSpec] = ()
    experience: Sequence[str] = ()
    harness_sft: int = 0


def stage_rollouts(train: TrainConfig, options: StageOptions = StageOptions()) -> int:
    """The most rollouts a weight stage with these settings can make — its declared size under a
    rollout cap (``coevo.meta.budget``): steps (a weight phase's ``max_steps``; a supervised harness
    fine-tuning stage's ``harness_sft`` rounds) x ``tasks_per_step`` x ``num_generations``, times, for
    GRPO, 1 + one Eq. 5 rescue group per task when the stage can rescue (siblings with a route or
    ``train.rescue``) + ``resample`` rounds of dynamic sampling."""
    if options.harness_sft:
        return options.harness_sft * train.tasks_per_step * train.num_generations
    steps = options.phase.max_steps if options.phase is not None else train.steps
    groups = 1
    if train.algorithm == "grpo":
        rescue = bool(options.siblings) and (options.route is not None or train.rescue)
        groups += int(rescue) + train.resample
    return steps * train.tasks_per_step * train.num_generations * groups


def training_spec(spec: HarnessSpec, train: TrainConfig) -> HarnessSpec:
    """``spec`` as training rollouts run it: sampled at ``train.temperature`` with
    ``train.max_new_tokens`` output tokens per model call and no fixed seed (training seeds each
    rollout itself, ``coevo.training.seeds``), whatever its own decoding and budget say (a new spec
    id; everything else unchanged)."""
    return spec.model_copy(update={
        "decoding": spec.decoding.model_copy(update={"temperature": train.temperature, "seed": None}),
        "budget": spec.budget.model_copy(update={"max_output_tokens": train.max_new_tokens})})


def measured(new: Checkpoint, parent: Checkpoint, incumbent_id: str) -> Checkpoint:
    """``new`` with the size of its LoRA change in its metrics (``delta_norm``: from ``parent``,
    the stage's own change; ``total_delta_norm``: from the base model; ``coevo.training.delta``) and
    the incumbent harness it trained under in its config (``incumbent_id``; ``harness_id`` names
    the training variant of it, see ``training_spec``)."""
    from coevo.training.delta import delta_norm

    metrics = {**new.metrics, "delta_norm": delta_norm(new, parent), "total_delta_norm": delta_norm(new)}
    return new.model_copy(update={"metrics": metrics, "config": {**new.config, "incumbent_id": incumbent_id}})


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


def grpo_phase(phase: WeightPhase, tasks: Sequence[Task], config: StageConfig) -> tuple[list[Task], int, StageConfig]:
    """A weight phase as a GRPO stage: its ``max_steps`` optimiser steps on the next tasks of the
    phase's persistent sampler (``phase.sampler`` over ``phase.stream`` from ``phase.position``,
    passing over tasks not in ``tasks``): one generation batch of ``tasks_per_step`` tasks per
    ``num_iterations`` steps. Returns (the drawn tasks, in order, as the stage's dataset; the
    sampler position after them; ``config`` with ``steps = max_steps``). Raises ``ValueError`` for
    a phase with a stopping rule (WHALE's adaptive rule ends RSFT phases only)."""
    if phase.stop is not None:
        raise ValueError("an adaptive weight phase (a stopping rule) runs RSFT; GRPO stages run their length")
    ids = {t.id for t in tasks}
    batches = -(-phase.max_steps // config.num_iterations)
    drawn, position = phase.sampler.take(phase.stream, phase.position, batches * config.tasks_per_step,
                                         keep=lambda t: t.id in ids)
    return drawn, position, config.model_copy(update={"steps": phase.max_steps})


class StageTrainer:
    """The weight stage behind ``MetaContext.trainer``: ``train_grpo`` (Harness-S §7) or
    ``train_rsft`` (WHALE §3.1), as ``config.train.algorithm`` says, on the given train tasks with
    the round's ``config.train.stage(...)``, run in a worker thread.

    Training rollouts sample as ``training_spec`` says. With ``config.train.rescue`` (GRPO only)
    and siblings, an all-fail group is re-rolled once under each sibling harness (Harness-S Eq. 5,
    ``coevo.training.rollout.sibling_rescue``; siblings cycled to the group size, sampled like
    the incumbent). With a ``route(task, k) -> harness ids`` (Harness-S Eq. 10: the router's top-K
    siblings of that task, H0 excluded) rescue is on whatever ``train.rescue`` says, and each task's
    rescue group runs under the siblings the router chose for it. With a ``mixture`` every GRPO group
    runs position j under ``mixture[j % len]`` (Harness-S App. 8; RSFT refuses it). Adapters are saved
    under the absolute ``<out_dir>/adapters`` and stored with that path. The new checkpoint's metrics
    get the size of its change (``measured``). With a run tracker, TRL logs the stage's steps to it
    (``tracked``). A weight phase (``StageOptions.phase``) goes to RSFT as its sampler, position,
    length and stopping rule; a GRPO stage draws its tasks from the phase's sampler (``grpo_phase``)
    and records ``sampler_position`` in its metrics.

    ``executor`` (the run's, ``coevo.evaluation.executors``; None: in process) is handed to the
    stage and its rescue: a server-backed sampler's groups run on its workers, while the default
    sampler, the trainer's live weights, samples in this process (``sampling_on``).

    With ``config.train.vllm`` (server roots; GRPO) the stage samples on those vLLM servers
    (``coevo.training.vllm_sync.VLLMStepSync``: the adapter hot-loaded each step under a
    content-hashed name, Eq. 16 on), on the executor's workers when there is one, and the new
    checkpoint is published there: its ``vllm`` are the roots and its ``model_ref`` the name it is
    served under (``served_ref``), through which the run's policies evaluate it.
    """

    def __init__(self, config: RunConfig, env: Env, archive: Any, run_id: str, executor: Any = None) -> None:
        self.config, self.env, self.archive, self.run_id = config, env, archive, run_id
        self.executor = executor

    def _train(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int,
               stage_options: StageOptions) -> tuple[str, list[Trajectory]]:
        train = self.config.train
        siblings, route = stage_options.siblings, stage_options.route
        checkpoint = self.archive.get(Checkpoint, checkpoint_id)
        if checkpoint is None:
            raise KeyError(f"checkpoint {checkpoint_id!r} is not in the archive")
        # absolute: the checkpoint's stored adapter_path must not depend on where a resume is started from
        config = train.stage(round, self.config.seed, Path(self.config.out_dir).expanduser().resolve())
        config = tracked(config, self.config, self.run_id, round)
        phase, drawn_to = stage_options.phase, None
        options: dict[str, Any] = phase.options() if phase and train.algorithm == "rsft" else {}
        teacher = bool(stage_options.harness_sft) and self.config.evoharness.teacher
        if stage_options.experience:
            from coevo.evaluation.executors import sampling_on
            from coevo.training.rollout import with_experience

            # outside the executor's placement, so the lessons reach its workers (a teacher samples here)
            options["rollout_fn"] = with_experience(stage_options.experience,
                                                    None if teacher else sampling_on(self.executor))
        elif self.executor is not None and not teacher:
            options["executor"] = self.executor
        if stage_options.harness_sft:
            from coevo.training.harness_cost import harness_sft_rows
            from coevo.training.rsft import train_rsft as stage

            sft = self.config.evoharness
            config = config.model_copy(update={"steps": stage_options.harness_sft,
                                               "epochs": sft.sft_epochs or config.epochs,
                                               "learning_rate": sft.sft_learning_rate or config.learning_rate})
            options["rows_fn"] = harness_sft_rows
            if teacher:
                from coevo.training.teacher import require_teachable, teacher_rollout

                require_teachable(self.env)  # before the stage, not as every rollout masked
                options["rollout_fn"] = teacher_rollout(options.get("rollout_fn"))
        elif train.algorithm == "rsft":
            if stage_options.mixture:
                raise ValueError("a mixed-harness stage mixes harnesses within GRPO groups (Harness-S App. 8), which "
                                 "RSFT does not form; set train.algorithm = \"grpo\"")
            from coevo.training.rsft import train_rsft as stage
        else:
            if phase is not None:
                tasks, drawn_to, config = grpo_phase(phase, tasks, config)
            from coevo.training.grpo import train_grpo as stage
            from coevo.training.rollout import sibling_rescue

            if train.vllm:
                from coevo.training.vllm_sync import VLLMStepSync

                sync_dir = Path(config.output_dir) / "vllm-sync" / f"round-{round}"
                options["policy_factory"] = VLLMStepSync(train.vllm, sync_dir, prefix=f"coevo-r{round}")

            variants = {s.id: training_spec(s, train) for s in siblings}
            placed = None
            if self.executor is not None and variants:
                from coevo.evaluation.executors import sampling_on

                placed = sampling_on(self.executor)
            if stage_options.mixture:
                options["mixture"] = [training_spec(s, train) for s in stage_options.mixture]
            if route is not None and variants:
                async def choose(task: Task, k: int) -> list[HarnessSpec]:
                    return [variants[h] for h in await route(task, k) if h in variants]

                options["rescue"] = sibling_rescue(choose, self.env, rollout_fn=placed, seed=config.seed)
            elif train.rescue and siblings:
                options["rescue"] = sibling_rescue(list(variants.values()), self.env, rollout_fn=placed,
                                                   seed=config.seed)
        new, trajectories = stage(checkpoint, training_spec(spec, train), self.env, tasks, config,
                                  archive=self.archive, run_id=self.run_id, **options)
        new = measured(new, checkpoint, spec.id)
        if drawn_to is not None:
            new = new.model_copy(update={"metrics": {**new.metrics, "sampler_position": drawn_to}})
        if train.vllm:
            from coevo.training.vllm_sync import adapter_name, publish_checkpoint, served_ref, unload_lora_adapter

            publish_checkpoint(new, train.vllm)
            sync = options["policy_factory"]
            if sync.loaded:  # the stage's last step: the checkpoint replaces it on the servers
                for root in sync.roots:
                    unload_lora_adapter(root, sync.loaded[-1])
            new = new.model_copy(update={"vllm": list(train.vllm),
                                         "model_ref": served_ref(train.vllm, adapter_name(new))})
        record_checkpoint(self.archive, new)
        return new.id, trajectories

    async def __call__(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int,
                       options: StageOptions = StageOptions()) -> tuple[str, list[Trajectory]]:
        """Train from ``checkpoint_id`` under ``spec`` on ``tasks`` in round ``round`` (``options``:
        the rescue pool, the router's choice among it, a weight phase; ``StageOptions``); returns the
        new checkpoint's id (recorded in the archive) and every training rollout. A weight phase goes
        to the stage as its sampler, position, length and stopping rule (``train_rsft`` takes them)."""
        return await asyncio.to_thread(self._train, checkpoint_id, spec, tasks, round, options)
