"""Intervals beside every score: Wilson for pass rates, bootstrap for partial credit and differences."""

import pytest

from coevo.evaluation.stats import difference_estimate, score_estimate


def test_pass_rate_gets_the_wilson_interval():
    est = score_estimate([1] * 3 + [0] * 7)
    assert est.method == "wilson" and est.n == 10 and est.mean == pytest.approx(0.3)
    # Wilson 95 % for 3/10 (textbook value: 0.108 to 0.603)
    assert est.low == pytest.approx(0.1078, abs=1e-3) and est.high == pytest.approx(0.6032, abs=1e-3)


def test_forty_tasks_at_thirty_percent_give_a_half_width_under_015():
    assert score_estimate([1] * 12 + [0] * 28).half_width <= 0.15
    assert score_estimate([1] * 3 + [0] * 7).half_width > 0.15


def test_partial_credit_uses_a_bootstrap_that_brackets_the_mean_and_is_reproducible():
    values = [0.2, 0.5, 0.9, 0.0, 1.0, 0.4, 0.6]
    est = score_estimate(values, seed=3)
    assert est.method == "bootstrap" and est.low < est.mean < est.high
    assert est == score_estimate(values, seed=3)


def test_out_of_range_scores_are_refused():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        score_estimate([0.5, 1.5])


def test_paired_difference_interval_excludes_zero_only_for_a_consistent_gain():
    a = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1]
    assert difference_estimate(a, [1] * 12).excludes_zero
    mixed = difference_estimate([0, 1] * 6, [1, 0] * 6)
    assert mixed.mean == 0 and not mixed.excludes_zero
    with pytest.raises(ValueError, match="equal lengths"):
        difference_estimate([0, 1], [1])
