"""The kinds of weight stage, one small typed object each, and the room a stage runs in.

A family picks the kind of its weight stage (``coevo.nodes.loop.run_stage`` takes it); the run's
``StageTrainer`` (``coevo.training.stage``) resolves the checkpoint and the round's ``StageConfig``,
hands both to the kind as a ``Room``, and records what the kind returns. The kinds here are the two
algorithms every family may run as the run's ``[train]`` section says (``configured``):

- ``GRPO``: Harness-S §7's objective (``coevo.training.grpo.stage.train_grpo``), with the Eq. 5 rescue
  pool used under ``train.rescue`` and a weight phase's sampler (``grpo_phase``);
- ``RSFT``: WHALE §3.1's online rejection-sampling fine-tuning (``coevo.training.rsft.train_rsft``),
  a weight phase going to it as its sampler, position, length and stopping rule.

The families' own kinds extend them where the family lives in ``coevo.training``: Harness-S's
router-chosen rescue and fixed mixture (``coevo.training.harness_s``), EvoHarness-RL's supervised
harness fine-tuning (``coevo.training.evoharness``).

What a stage declares it can spend, its most rollouts, is each kind's ``rollouts`` (one formula,
``declared``); ``stage_rollouts`` is what the run's rollout cap asks (``coevo.meta.budget``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from coevo.config import RunConfig, TrainConfig
from coevo.config.train import StageConfig
from coevo.envs.base import Env, Task
from coevo.harnesses.spec import HarnessSpec
from coevo.models.checkpoint import Checkpoint
from coevo.models.trajectory import Trajectory
from coevo.training.schedule import WeightPhase

Route = Callable[[Task, int], Awaitable[list[str]]]
"""A router's rescue choice: ``route(task, k)`` -> at most k distinct sibling harness ids (Harness-S Eq. 10)."""


def training_spec(spec: HarnessSpec, train: TrainConfig) -> HarnessSpec:
    """``spec`` as training rollouts run it: sampled at ``train.temperature`` with
    ``train.max_new_tokens`` output tokens per model call and no fixed seed (training seeds each
    rollout itself, ``coevo.training.grpo.seeds``), whatever its own decoding and budget say (a new spec
    id; everything else unchanged)."""
    return spec.model_copy(update={
        "decoding": spec.decoding.model_copy(update={"temperature": train.temperature, "seed": None}),
        "budget": spec.budget.model_copy(update={"max_output_tokens": train.max_new_tokens})})


def measured(new: Checkpoint, parent: Checkpoint, incumbent_id: str) -> Checkpoint:
    """``new`` with the size of its LoRA change in its metrics (``delta_norm``: from ``parent``,
    the stage's own change; ``total_delta_norm``: from the base model; ``coevo.training.delta``) and
    the incumbent harness it trained under in its config (``incumbent_id``; ``harness_id`` names
    the training variant of it, see ``training_spec``)."""
    from coevo.training.delta import delta_norms

    stage, total = delta_norms(new, parent)
    metrics = {**new.metrics, "delta_norm": stage, "total_delta_norm": total}
    return new.model_copy(update={"metrics": metrics, "config": {**new.config, "incumbent_id": incumbent_id}})


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
    drawn, position = phase.sampler.take(phase.stream, phase.position,
                                         batches(phase.max_steps, config.num_iterations) * config.tasks_per_step,
                                         keep=lambda t: t.id in ids)
    return drawn, position, config.model_copy(update={"steps": phase.max_steps})


def batches(steps: int, num_iterations: int = 1) -> int:
    """The generation batches a GRPO stage of ``steps`` optimiser steps samples: ceil(steps /
    ``num_iterations``), TRL's ``num_iterations`` optimiser passes reusing each batch (``grpo_phase``
    draws this many batches of tasks; ``GRPO.rollouts`` declares this many)."""
    return -(-steps // num_iterations)


def declared(train: TrainConfig, steps: int, groups: int = 1) -> int:
    """A stage's most rollouts: ``steps`` x ``train.tasks_per_step`` x ``train.num_generations`` x
    ``groups``, where ``steps`` counts what samples — a GRPO stage's generation batches (``batches``),
    an RSFT stage's rounds — and ``groups`` the groups per task and batch (1, plus rescue and
    dynamic-sampling groups for GRPO). Every kind's ``rollouts`` counts with this one formula."""
    return steps * train.tasks_per_step * train.num_generations * groups


@dataclass(frozen=True)
class Room:
    """What a stage kind runs with: the run's ``config`` (its ``[train]`` section is ``train``), the
    ``env``, the ``archive`` and ``run_id`` the new checkpoint is recorded under, the run's
    ``executor`` (None: in process), the ``round``, the start ``checkpoint``, the incumbent ``spec``
    (as it is; the kinds sample its ``training_spec``), the stage's ``tasks`` and its ``StageConfig``
    (``stage``: the round's ``train.stage(...)`` with the tracker's settings)."""

    config: RunConfig
    env: Env
    archive: Any
    run_id: str
    executor: Any
    round: int
    checkpoint: Checkpoint
    spec: HarnessSpec
    tasks: Sequence[Task]
    stage: StageConfig

    @property
    def train(self) -> TrainConfig:
        """The run's ``[train]`` section."""
        return self.config.train

    def measured(self, new: Checkpoint) -> Checkpoint:
        """``new`` with the size of its change from this room's checkpoint and the incumbent it trained
        under (``measured``)."""
        return measured(new, self.checkpoint, self.spec.id)

    def placement(self, experience: Sequence[str], teacher: bool = False) -> dict[str, Any]:
        """Where the stage's rollouts run, as a stage function's keyword arguments: with ``experience``
        (EvoHarness-RL's BPE lessons) a ``rollout_fn`` that starts every rollout from them
        (``coevo.training.grpo.rollout.with_experience``), wrapped outside the executor's placement so the
        lessons reach its workers (not for a ``teacher``, who samples here); else the ``executor``
        when there is one and no teacher; else nothing (in process)."""
        if experience:
            from coevo.evaluation.executors import sampling_on
            from coevo.training.grpo.rollout import with_experience

            return {"rollout_fn": with_experience(experience, None if teacher else sampling_on(self.executor))}
        if self.executor is not None and not teacher:
            return {"executor": self.executor}
        return {}


class StageKind(ABC):
    """One kind of weight stage: what it may spend (``rollouts``), the harnesses other than the
    incumbent its rollouts may run under (``harnesses``, stored under the harnesses themselves),
    its Eq. 5 rescue pool (``pool``, for the stage's log) and how it runs (``run``: the new
    checkpoint, measured, not yet recorded, and every training rollout)."""

    experience: tuple[str, ...] = ()

    @abstractmethod
    def rollouts(self, train: TrainConfig) -> int:
        """The stage's most rollouts under ``train`` (``declared``)."""

    def updates(self, train: TrainConfig) -> int:
        """The weight updates the stage makes, what an updates cap counts (``RunConfig.updates``): its
        ``train.steps`` (GRPO optimiser steps, RSFT rounds)."""
        return train.steps

    def fitted(self, train: TrainConfig, left: int) -> "StageKind | None":
        """The stage as it may run with ``left`` rollouts left under a rollout cap: itself when its
        ``rollouts`` fit, else None — a stage of a fixed length is part of its strategy's schedule and is
        not cut (the cap then ends the run before it, ``coevo.meta.budget``)."""
        return self if self.rollouts(train) <= left else None

    def harnesses(self) -> list[HarnessSpec]:
        """The harnesses besides the incumbent that the stage's rollouts may run under."""
        return []

    def pool(self) -> Sequence[HarnessSpec]:
        """The stage's Eq. 5 rescue pool (empty: it does not rescue)."""
        return ()

    @abstractmethod
    def run(self, room: Room) -> tuple[Checkpoint, list[Trajectory]]:
        """Run the stage in ``room``: (the new checkpoint, measured; every training rollout)."""


@dataclass(frozen=True)
class RSFT(StageKind):
    """WHALE §3.1's online RSFT (``train_rsft``): ``train.steps`` rounds, or a weight ``phase`` as the
    stage's sampler, position, length and stopping rule; ``experience`` the lessons every rollout
    starts with (EvoHarness-RL)."""

    phase: WeightPhase | None = None
    experience: tuple[str, ...] = ()

    def rollouts(self, train: TrainConfig) -> int:
        """``declared`` over the phase's ``max_steps`` (else ``train.steps``) rounds, one group each."""
        return declared(train, self.phase.max_steps if self.phase is not None else train.steps)

    def updates(self, train: TrainConfig) -> int:
        """The phase's ``max_steps`` rounds (else ``train.steps``)."""
        return self.phase.max_steps if self.phase is not None else train.steps

    def fitted(self, train: TrainConfig, left: int) -> "RSFT | None":
        """As ``StageKind.fitted``, but an adaptive phase (one with a stopping rule, WHALE §4) whose most
        rounds would overrun runs to what is left: its ``max_steps`` cut to the whole rounds ``left``
        affords (None when not one round does). Its rule may still stop it earlier; stopping at the cap
        is recorded like the rule's stop (the stage's ``steps``)."""
        if self.rollouts(train) <= left:
            return self
        rounds = left // declared(train, 1)
        if self.phase is None or self.phase.stop is None or rounds < 1:
            return None
        return replace(self, phase=replace(self.phase, max_steps=rounds))

    def run(self, room: Room) -> tuple[Checkpoint, list[Trajectory]]:
        """One ``train_rsft`` stage in ``room``."""
        from coevo.training.rsft import train_rsft

        options = {**(self.phase.options() if self.phase is not None else {}), **room.placement(self.experience)}
        new, trajectories = train_rsft(room.checkpoint, training_spec(room.spec, room.train), room.env, room.tasks,
                                       room.stage, archive=room.archive, run_id=room.run_id, **options)
        return room.measured(new), trajectories


@dataclass(frozen=True)
class GRPO(StageKind):
    """Harness-S §7's GRPO stage (``train_grpo``). ``siblings``: the Eq. 5 rescue pool, used under
    ``train.rescue`` (an all-fail group re-rolled once under each sibling, cycled to the group size
    and sampled like the incumbent; ``coevo.training.grpo.rollout.sibling_rescue``); ``phase``: a weight
    phase the stage draws its tasks from (``grpo_phase``; the sampler position after them goes into
    the checkpoint's metrics as ``sampler_position``); ``experience``: the lessons every rollout starts
    with. With ``train.vllm`` the stage samples on those servers (``VLLMStepSync``) and the new
    checkpoint is published there (``vllm``, ``model_ref``)."""

    siblings: tuple[HarnessSpec, ...] = ()
    phase: WeightPhase | None = None
    experience: tuple[str, ...] = ()

    def rescues(self, train: TrainConfig) -> bool:
        """Whether the stage can rescue: siblings under ``train.rescue``."""
        return bool(self.siblings) and train.rescue

    def rollouts(self, train: TrainConfig) -> int:
        """``declared`` over the generation batches the stage samples — one per ``train.num_iterations``
        optimiser steps of the phase's ``max_steps`` (else ``train.steps``): ceil(steps / num_iterations),
        as TRL reuses a batch for num_iterations steps — with, for GRPO, 1 + one Eq. 5 rescue group per
        task when the stage can rescue + ``train.resample`` rounds of dynamic sampling."""
        steps = self.phase.max_steps if self.phase is not None else train.steps
        groups = 1
        if train.algorithm == "grpo":
            groups += int(self.rescues(train)) + train.resample
        return declared(train, batches(steps, train.num_iterations), groups)

    def updates(self, train: TrainConfig) -> int:
        """The phase's ``max_steps`` optimiser steps (else ``train.steps``)."""
        return self.phase.max_steps if self.phase is not None else train.steps

    def harnesses(self) -> list[HarnessSpec]:
        """The rescue siblings."""
        return list(self.siblings)

    def pool(self) -> Sequence[HarnessSpec]:
        """The rescue siblings."""
        return self.siblings

    def rescue(self, room: Room, variants: dict[str, HarnessSpec], placed: Any, seed: int) -> Any:
        """The Eq. 5 hook of the stage (None: no rescue): ``sibling_rescue`` over the siblings'
        training ``variants`` (by harness id), run through ``placed`` (the executor's sampling
        placement, None: in process), seeded by the stage's ``seed``."""
        if not (room.train.rescue and self.siblings):
            return None
        from coevo.training.grpo.rollout import sibling_rescue

        return sibling_rescue(list(variants.values()), room.env, rollout_fn=placed, seed=seed)

    def group_options(self, room: Room) -> dict[str, Any]:
        """Further ``train_grpo`` keyword arguments of the kind (none here)."""
        return {}

    def run(self, room: Room) -> tuple[Checkpoint, list[Trajectory]]:
        """One ``train_grpo`` stage in ``room``, its checkpoint measured, its sampler position recorded
        and, with ``train.vllm``, published on the servers."""
        from coevo.training.grpo.stage import train_grpo

        train, options = room.train, room.placement(self.experience)
        tasks, config, drawn_to = room.tasks, room.stage, None
        if self.phase is not None:
            tasks, drawn_to, config = grpo_phase(self.phase, tasks, config)
        sync = None
        if train.vllm:
            from coevo.training.vllm_sync import VLLMStepSync

            sync = VLLMStepSync(train.vllm, Path(config.output_dir) / "vllm-sync" / f"round-{room.round}",
                                prefix=f"coevo-r{room.round}")
            options["policy_factory"] = sync
        variants = {s.id: training_spec(s, train) for s in self.siblings}
        placed = None
        if room.executor is not None and variants:
            from coevo.evaluation.executors import sampling_on

            placed = sampling_on(room.executor)
        options.update(self.group_options(room))
        rescue = self.rescue(room, variants, placed, config.seed)
        if rescue is not None:
            options["rescue"] = rescue
        new, trajectories = train_grpo(room.checkpoint, training_spec(room.spec, train), room.env, tasks, config,
                                       archive=room.archive, run_id=room.run_id, **options)
        new = room.measured(new)
        if drawn_to is not None:
            new = new.model_copy(update={"metrics": {**new.metrics, "sampler_position": drawn_to}})
        if sync is not None:
            new = published(new, train.vllm, sync)
        return new, trajectories


def published(new: Checkpoint, roots: Sequence[str], sync: Any) -> Checkpoint:
    """``new`` published on the vLLM servers at ``roots`` (``coevo.training.vllm_sync``): the stage's
    last step adapter unloaded from them (``sync``, the stage's ``VLLMStepSync``), the checkpoint
    loaded in its place; its ``vllm`` are the roots and its ``model_ref`` the name it is served under."""
    from coevo.training.vllm_sync import adapter_name, publish_checkpoint, served_ref, unload_lora_adapter

    publish_checkpoint(new, roots)
    if sync.loaded:  # the stage's last step: the checkpoint replaces it on the servers
        for root in sync.roots:
            unload_lora_adapter(root, sync.loaded[-1])
    return new.model_copy(update={"vllm": list(roots), "model_ref": served_ref(roots, adapter_name(new))})


def configured(train: TrainConfig, siblings: Sequence[HarnessSpec] = (), *, phase: WeightPhase | None = None,
               experience: Sequence[str] = ()) -> GRPO | RSFT:
    """The stage kind the run's ``[train]`` section names (``train.algorithm``): ``GRPO`` with
    ``siblings`` as its Eq. 5 rescue pool, or ``RSFT`` (which forms no groups, so rescues nothing);
    either on a weight ``phase`` and starting every rollout from ``experience``."""
    if train.algorithm == "rsft":
        return RSFT(phase=phase, experience=tuple(experience))
    return GRPO(siblings=tuple(siblings), phase=phase, experience=tuple(experience))


def stage_rollouts(train: TrainConfig, kind: StageKind | None = None) -> int:
    """The most rollouts a weight stage of ``kind`` (None: ``configured(train)``) can make — its
    declared size under a rollout cap (``coevo.meta.budget``): ``kind.rollouts(train)``, each kind
    counting with ``declared``."""
    return (kind if kind is not None else configured(train)).rollouts(train)
