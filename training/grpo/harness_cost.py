"""Cost-aware GRPO's reward, the harness-use numbers of a batch and the rows of supervised harness
fine-tuning (EvoHarness-RL).

Source: EvoHarness-RL ("Learning Runtime Harness Coordination for Self-Evolving Agents", arXiv:2608.05446), abstract:
cost-aware GRPO trains the policy to access its BPE harness state *selectively*. Here the reward
that enters Eq. 6's group advantages (Harness-S §3; ``coevo.training.grpo.advantages``) is

    r = task reward - lambda x harness cost

with the harness cost the declared cost of the episode's BPE actions summed
(``Trajectory.harness_cost``) and lambda ``train.action_cost``; the GRPO objective is unchanged.
The two parts stay apart: ``Trajectory.reward`` is the task reward, and the stage's metrics log
task reward, harness cost and shaped reward separately (``harness_metrics``).
"""

from __future__ import annotations

import statistics
from typing import Sequence

from coevo.harnesses.bpe import state_chars
from coevo.models.trajectory import Trajectory
from coevo.training.grpo.samples import Row, trajectory_rows

HARNESS_KEYS = ("task_reward", "harness_cost", "shaped_reward", "action_rate", "harness_reads", "harness_writes",
                "state_chars")
"""The keys of ``harness_metrics``, in order."""


def shaped_reward(trajectory: Trajectory, action_cost: float) -> float:
    """``trajectory.reward - action_cost * trajectory.harness_cost`` (the task reward when
    ``action_cost`` is 0 or no harness action was made). Raises ``ValueError`` for a negative
    ``action_cost`` (a bonus for harness calls is not cost-aware GRPO)."""
    if action_cost < 0:
        raise ValueError(f"action_cost (lambda) must be >= 0, got {action_cost}; set train.action_cost >= 0")
    return trajectory.reward - action_cost * trajectory.harness_cost


def harness_metrics(trajectories: Sequence[Trajectory], action_cost: float = 0.0) -> dict[str, float]:
    """Harness-use numbers of a batch of rollouts (means over the rollouts; zeros when empty):
    ``task_reward``, ``harness_cost`` (declared cost per rollout), ``shaped_reward``
    (``shaped_reward`` at ``action_cost``), ``action_rate`` (BPE actions per model turn, pooled over
    the batch: the annealing curve's y), ``harness_reads`` and ``harness_writes`` per rollout, and
    ``state_chars`` (the final BPE state's size in characters, ``coevo.harnesses.bpe.state_chars``)."""
    if not trajectories:
        return dict.fromkeys(HARNESS_KEYS, 0.0)
    turns = sum(t.model_turns for t in trajectories)
    return {
        "task_reward": statistics.fmean(t.reward for t in trajectories),
        "harness_cost": statistics.fmean(t.harness_cost for t in trajectories),
        "shaped_reward": statistics.fmean(shaped_reward(t, action_cost) for t in trajectories),
        "action_rate": sum(len(t.harness_actions) for t in trajectories) / turns if turns else 0.0,
        "harness_reads": statistics.fmean(t.harness_reads for t in trajectories),
        "harness_writes": statistics.fmean(t.harness_writes for t in trajectories),
        "state_chars": statistics.fmean(state_chars(t.harness_state) for t in trajectories),
    }


def bpe_turns(trajectory: Trajectory) -> set[int]:
    """The model turns (1-based call numbers) in which the policy made a BPE harness action that
    applied (``harness_actions`` entries without an error)."""
    return {int(a["turn"]) for a in trajectory.harness_actions if not a.get("error")}


def harness_sft_rows(trajectory: Trajectory, max_len: int | None = None) -> list[Row]:
    """Supervised harness fine-tuning's rows of one (accepted) rollout (EvoHarness-RL: SFT teaches
    the harness action space before RL): the policy tokens of its BPE-using turns only
    (``bpe_turns``); every other token is context with mask 0. Empty when it made no BPE action
    that applied. Raises ``MissingTokensError`` like ``trajectory_rows``."""
    turns = bpe_turns(trajectory)
    return trajectory_rows(trajectory, 1.0, 0, max_len, turns=turns) if turns else []
