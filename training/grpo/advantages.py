"""Group-relative advantages and the learning-signal statistics of a GRPO step (Harness-S §3, §7).

Eq. 6: ``A_{x,j} = (r_{x,j} - mean_x) / max(std_x, eps)`` with the *population* standard
deviation of the task's group and ``eps = 1e-6`` (Appendix §7). Eq. 15 averages the token loss over the policy tokens of
each task, then over tasks; :func:`task_token_weights` turns that into one positive factor per
task so that a plain token-mean over the whole batch (TRL's ``dapo`` aggregation) equals Eq. 15.
Eq. 16's truncated importance weight is :func:`truncated_is_weight`.
"""

from __future__ import annotations

import math
import statistics
from typing import Iterable, Sequence

import torch

EPS = 1e-6


def group_advantages(rewards: Sequence[float], eps: float = EPS) -> list[float]:
    """Eq. 6 for one task's group: ``(r - mean) / max(population_std, eps)``.

    Args: ``rewards`` the G rewards of one group (G >= 1). Returns G floats; all zeros when the
    rewards are equal (no learning signal). Raises ``ValueError`` on an empty group or a NaN reward.
    """
    if len(rewards) == 0:
        raise ValueError("group_advantages: the group is empty; pass the K rewards of one task")
    if any(math.isnan(r) for r in rewards):
        raise ValueError(f"group_advantages: a reward is NaN in {list(rewards)}; score every rollout first")
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    if std < 1e-12:  # equal rewards up to float noise: exactly zero, not noise / eps
        return [0.0] * len(rewards)
    return [(r - mean) / max(std, eps) for r in rewards]


def needs_rescue(rewards: Sequence[float], full: float = 1.0) -> bool:
    """Eq. 5's trigger on the rewards Eq. 6 normalises: a group is rescued when no rollout earned full
    credit (``max r < full``) *and* its rewards hold no contrast (all equal, so Eq. 6 gives every
    rollout a zero advantage). With a binary verifier this is Eq. 5 exactly (all K rollouts fail);
    with partial credit a group that already has reward contrast keeps its own rollouts, since it
    carries a learning signal. Raises ``ValueError`` on an empty group.

    ``rewards`` are the *task* rewards, also under cost-aware GRPO (EvoHarness-RL), where Eq. 6
    normalises the cost-shaped ones (``coevo.training.grpo.harness_cost.shaped_reward``): Eq. 5 rescues
    a group for lack of *success*, and neither part of that reads the action cost. On shaped
    rewards, a group in which every rollout passed at one equal cost (all 1 - lambda x cost < 1, no
    contrast) would be "rescued", and a group that failed everywhere but paid different costs
    would keep a signal that teaches only to fail more cheaply in place of the rescue's successes.
    Dynamic sampling, which asks only whether Eq. 6 has a signal, reads the shaped rewards
    (``coevo.training.grpo.masking.has_contrast``)."""
    if len(rewards) == 0:
        raise ValueError("needs_rescue: the group is empty; pass the K rewards of one task")
    return max(rewards) < full and max(rewards) - min(rewards) < 1e-12


def rescued_better(failed: Sequence[float], rescue: Sequence[float]) -> bool:
    """Whether a rescue group succeeded (Harness-S §4.3's rescue success, on the same notion as
    ``needs_rescue``): some rescue rollout earned more than the failed group's common reward (with a
    binary verifier: at least one rescue rollout passed)."""
    return bool(rescue) and max(rescue) > max(failed, default=0.0)


def mean_or_zero(values: Iterable[float]) -> float:
    """The mean of ``values``; 0.0 when there are none (a group or step whose rollouts were all masked)."""
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def is_effective(passed: Sequence[bool]) -> bool:
    """A group is effective when it holds both a success and a failure (Harness-S §3)."""
    return any(passed) and not all(passed)


def effective_group_rate(groups_passed: Sequence[Sequence[bool]]) -> float:
    """Fraction of groups with both successes and failures; 0.0 for no groups."""
    if not groups_passed:
        return 0.0
    return sum(is_effective(g) for g in groups_passed) / len(groups_passed)


def effective_token_share(advantages: Sequence[Sequence[float]], tokens: Sequence[Sequence[int]]) -> float:
    """Share of policy tokens that carry a learning signal (their trajectory's advantage is non-zero).

    Args: per group, the advantage of each trajectory and its number of policy tokens (same
    nesting). Returns a fraction in [0, 1]; 0.0 when there are no policy tokens.
    """
    total = signal = 0
    for group_adv, group_tok in zip(advantages, tokens, strict=True):
        for adv, n in zip(group_adv, group_tok, strict=True):
            total += n
            signal += n if adv != 0.0 else 0
    return signal / total if total else 0.0


def task_token_weights(tokens_per_task: Sequence[int]) -> list[float]:
    """Per-task factors ``c_x = N / (|B| * N_x)`` that turn a batch token-mean into Eq. 15.

    ``sum_x c_x * sum_{tokens of x} l / N = (1/|B|) * sum_x (1/N_x) * sum_{tokens of x} l`` where
    ``N = sum_x N_x``. Tasks with ``N_x = 0`` get 0 (they contribute zero, and still count in |B|).
    """
    total, n_tasks = sum(tokens_per_task), len(tokens_per_task)
    return [total / (n_tasks * n) if n else 0.0 for n in tokens_per_task]


def truncated_is_weight(
    old_logps: torch.Tensor, sampling_logps: torch.Tensor, low: float = 0.0, high: float = 2.0
) -> torch.Tensor:
    """Eq. 16: ``clip(pi_old / q, low, high)`` per token, detached (no gradient).

    Args: ``old_logps`` the trainer's log-probs of the sampled tokens before the update,
    ``sampling_logps`` the sampler's (``q``), same shape. NaN sampler log-probs give weight 1.
    """
    ratio = torch.exp(old_logps.detach() - sampling_logps)
    return torch.nan_to_num(ratio, nan=1.0).clamp(low, high)
