"""Which rollouts a training step learns from: failures are masked, not
learned.

A rollout that raised (the model, the env, the harness: ``guarded`` turns it into a
``failed_trajectory``) or that carries no sampled token (no model call returned completion token
ids: nothing to train on) says nothing about the policy. Such a rollout is kept in the step's
record (``HarnessRollout.trajectories``, the archive) and counted in the step's metrics
(``failed_rollouts``, ``tokenless_rollouts``), but it is no member of its group: Eq. 6's mean and
std (Harness-S §7) are taken over the group's other rollouts and it gets no advantage and no row.
A group left with fewer than ``MIN_MEMBERS`` rollouts has no baseline and is dropped
(``dropped_groups``). Before, a raised rollout stayed in its group as reward 0, so a correct sibling
got advantage +1 from the failure alone. RSFT (WHALE §3.1) follows the same rule: masked rollouts
are neither samples of its statistics nor accepted.

A trajectory whose server said it could not return token ids (``Trajectory.missing_tokens``) is a
configuration error rather than a failure: ``members`` raises ``MissingTokensError`` for it.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Sequence

from langchain_core.language_models import BaseChatModel

from coevo.envs.base import Env, Task
from coevo.models.trajectory import Trajectory
from coevo.training.grpo.harness_cost import shaped_reward

log = logging.getLogger(__name__)
RolloutFn = Callable[..., Awaitable[Trajectory]]

MIN_MEMBERS = 2
"""Fewest unmasked rollouts a GRPO group needs to train (Eq. 6 compares each with the others)."""


def failed_trajectory(spec: Any, task: Task, seed: int, checkpoint_id: str, error: Exception) -> Trajectory:
    """The trajectory of a rollout that raised ``error``: reward 0, not passed, no model calls
    (so it yields no training row), ``stop_reason`` ``error:<type>`` and ``score_detail["error"]``."""
    return Trajectory(task_id=task.id, env=task.env, split=task.split, harness_id=getattr(spec, "id", ""),
                      checkpoint_id=checkpoint_id, seed=seed, stop_reason=f"error:{type(error).__name__}",
                      reward=0.0, passed=False, score_detail={"error": f"{type(error).__name__}: {error}"})


def is_failed(trajectory: Trajectory) -> bool:
    """Whether ``trajectory`` stands for a rollout that raised (``failed_trajectory``)."""
    return trajectory.stop_reason.startswith("error:")


def is_tokenless(trajectory: Trajectory) -> bool:
    """Whether no model call of ``trajectory`` carries sampled token ids (nothing to train on)."""
    return not any(call.completion_token_ids for call in trajectory.calls)


def masked(trajectory: Trajectory) -> str | None:
    """Why ``trajectory`` is no member of its group: ``"failed"``, ``"tokenless"``, or None."""
    return "failed" if is_failed(trajectory) else "tokenless" if is_tokenless(trajectory) else None


def members(group: Sequence[Trajectory]) -> list[Trajectory]:
    """The rollouts of ``group`` that its statistics and loss use (``masked`` ones left out), in order.
    Raises ``MissingTokensError`` for a rollout whose server could not return token ids."""
    for t in group:
        t.require_tokens()
    return [t for t in group if masked(t) is None]


def has_contrast(group: Sequence[Trajectory], action_cost: float = 0.0) -> bool:
    """Whether the rewards of ``group``'s members (cost-aware at ``action_cost``,
    ``coevo.training.grpo.harness_cost.shaped_reward``) differ (Eq. 6 then gives some rollout a non-zero
    advantage)."""
    return len({shaped_reward(t, action_cost) for t in members(group)}) > 1


def mask_counts(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """``failed_rollouts`` and ``tokenless_rollouts`` among ``trajectories`` (step metrics)."""
    reasons = [masked(t) for t in trajectories]
    return {"failed_rollouts": float(reasons.count("failed")), "tokenless_rollouts": float(reasons.count("tokenless"))}


def guarded(run: RolloutFn) -> RolloutFn:
    """``run`` (a rollout function ``(spec, policy, env, task, seed=, checkpoint_id=)``) whose
    exceptions become ``failed_trajectory`` results, each logged as a warning. Cancellation and
    other ``BaseException`` s still propagate."""

    async def guarded_run(spec: Any, policy: BaseChatModel, env: Env, task: Task, seed: int = 0,
                          checkpoint_id: str = "", **kwargs: Any) -> Trajectory:
        try:
            return await run(spec, policy, env, task, seed=seed, checkpoint_id=checkpoint_id, **kwargs)
        except Exception as err:
            log.warning("rollout of task %s (seed %d) failed and is masked out of its group: %s: %s",
                        task.id, seed, type(err).__name__, err)
            return failed_trajectory(spec, task, seed, checkpoint_id, err)

    return guarded_run
