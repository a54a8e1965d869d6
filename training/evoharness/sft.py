"""EvoHarness-RL's supervised harness fine-tuning before RL, as a weight-stage kind."""

from __future__ import annotations

from dataclasses import dataclass

from coevo.config import TrainConfig
from coevo.models.checkpoint import Checkpoint
from coevo.models.trajectory import Trajectory
from coevo.training.kinds import Room, StageKind, declared, training_spec


@dataclass(frozen=True)
class HarnessSFT(StageKind):
    """``rounds`` RSFT rounds whatever ``train.algorithm`` says (``evoharness.sft_epochs`` passes at
    ``evoharness.sft_learning_rate`` when set), trained on the BPE-using turns of accepted rollouts
    only (``coevo.training.grpo.harness_cost.harness_sft_rows``), played by the scripted harness teacher
    when ``evoharness.teacher`` (``coevo.training.evoharness.teacher.teacher_rollout``); every rollout
    starts from ``experience``, the BPE lineage's lessons."""

    rounds: int = 1
    experience: tuple[str, ...] = ()

    def rollouts(self, train: TrainConfig) -> int:
        """``declared`` over ``rounds`` rounds, one group each."""
        return declared(train, self.rounds)

    def updates(self, train: TrainConfig) -> int:
        """Its ``rounds``."""
        return self.rounds

    def run(self, room: Room) -> tuple[Checkpoint, list[Trajectory]]:
        """One ``train_rsft`` stage of harness SFT in ``room``. Raises ``TypeError`` (before any
        rollout) when the teacher plays and the env cannot be taught (``require_teachable``)."""
        from coevo.training.grpo.harness_cost import harness_sft_rows
        from coevo.training.rsft import train_rsft

        sft, teacher = room.config.evoharness, room.config.evoharness.teacher
        options = room.placement(self.experience, teacher=teacher)
        config = room.stage.model_copy(update={"steps": self.rounds, "epochs": sft.sft_epochs or room.stage.epochs,
                                               "learning_rate": sft.sft_learning_rate or room.stage.learning_rate})
        options["rows_fn"] = harness_sft_rows
        if teacher:
            from coevo.training.evoharness.teacher import require_teachable, teacher_rollout

            require_teachable(room.env)  # before the stage, not as every rollout masked
            options["rollout_fn"] = teacher_rollout(options.get("rollout_fn"))
        new, trajectories = train_rsft(room.checkpoint, training_spec(room.spec, room.train), room.env, room.tasks,
                                       config, archive=room.archive, run_id=room.run_id, **options)
        return room.measured(new), trajectories
