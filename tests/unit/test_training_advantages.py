"""Harness-S Eq. 6 advantages, Eq. 15 per-task weights, Eq. 16 weights and the signal statistics."""

import math

import pytest
import torch

from coevo.training.grpo.advantages import (
    effective_group_rate,
    effective_token_share,
    group_advantages,
    task_token_weights,
    truncated_is_weight,
)


def test_advantages_match_eq6_with_population_std_on_a_hand_computed_group():
    # rewards 1,0,0,0: mean 0.25, population variance (0.5625 + 3 * 0.0625) / 4 = 0.1875
    std = math.sqrt(0.1875)
    expected = [0.75 / std, -0.25 / std, -0.25 / std, -0.25 / std]
    assert group_advantages([1.0, 0.0, 0.0, 0.0]) == pytest.approx(expected, rel=1e-9)
    # Bessel's std (TRL's) would give 0.75 / 0.5 = 1.5 for the first one
    assert group_advantages([1.0, 0.0, 0.0, 0.0])[0] == pytest.approx(1.7320508, rel=1e-6)


def test_advantages_divide_by_eps_when_the_std_is_below_it():
    # std 5e-8 < eps = 1e-6: (r - mean) / eps = +-5e-8 / 1e-6 = +-0.05
    assert group_advantages([0.0, 1e-7]) == pytest.approx([-0.05, 0.05], rel=1e-6)


def test_equal_rewards_give_exactly_zero_advantages():
    assert group_advantages([0.3, 0.3, 0.3]) == [0.0, 0.0, 0.0]


def test_bad_groups_raise_clear_errors():
    with pytest.raises(ValueError, match="empty"):
        group_advantages([])
    with pytest.raises(ValueError, match="NaN"):
        group_advantages([1.0, float("nan")])


def test_effective_group_rate_counts_groups_with_both_outcomes():
    groups = [[True, False], [False, False], [True, True], [False, True]]
    assert effective_group_rate(groups) == 0.5
    assert effective_group_rate([]) == 0.0


def test_effective_token_share_counts_tokens_of_nonzero_advantages():
    advantages = [[1.0, -1.0], [0.0, 0.0]]
    tokens = [[10, 30], [40, 20]]
    assert effective_token_share(advantages, tokens) == pytest.approx(40 / 100)


def test_task_token_weights_turn_a_batch_token_mean_into_eq15():
    torch.manual_seed(0)
    tokens = [10, 30, 0]
    losses = [torch.randn(n) for n in tokens]
    weights = task_token_weights(tokens)
    batch_token_mean = sum(w * loss.sum() for w, loss in zip(weights, losses)) / sum(tokens)
    eq15 = sum(loss.mean() for loss in losses if len(loss)) / len(tokens)  # a task with no tokens contributes zero
    assert float(batch_token_mean) == pytest.approx(float(eq15), rel=1e-6)
    assert weights[2] == 0.0


def test_truncated_is_weight_clips_ratio_to_zero_two():
    old = torch.tensor([0.0, -1.0, -3.0, -1.0])
    q = torch.tensor([-1.0, -1.0, -1.0, float("nan")])
    w = truncated_is_weight(old, q)
    assert w.tolist() == pytest.approx([2.0, 1.0, math.exp(-2.0), 1.0])
