"""What a comparison's table cannot claim, said beside it (``coevo compare``): one sentence per
caveat, from a ``coevo.app.compare.Comparison``, printed under the table and listed in the report.

``comparison_warnings`` is the one place such checks go (today: at a budget, strategies that cannot
reach it or stopped well short of it; strategies with no learning signal); ``ended`` says how one run at a budget ended.
"""

from __future__ import annotations

from typing import Any

from coevo.meta.budget import cut_call


def ended(run: Any, budget: int) -> str:
    """How a run (a ``StrategyRun``) ended at a ``budget``: ``"seed s: at the cap after S rollouts,
    before <the call that would have overrun> (n rollouts)"``, or ``"seed s: its schedule ended at S
    rollouts, short of the budget N"``."""
    spent = run.budget.get("rollouts", 0.0)
    if run.budget_stop:
        return f"seed {run.seed}: at the cap after {spent:.0f} rollouts, before {cut_call(run.budget_stop)}"
    return f"seed {run.seed}: its schedule ended at {spent:.0f} rollouts, short of the budget {budget}"


def comparison_warnings(comparison: Any) -> list[str]:
    """What keeps ``comparison`` from comparing its strategies at equal spend, one sentence each
    (printed under the table, listed in the report): at a budget N, every strategy that cannot reach
    it (a seed whose schedule ended short of N), and every one the cap stopped more than a tenth short
    of N (its next phase was that large); and, with or without a budget, the strategies whose weight
    stages had no learning signal (``StrategyRow.no_signal``)."""
    out = []
    silent = [row.strategy for row in comparison.rows if getattr(row, "no_signal", False)]
    if silent:
        out.append(f"no learning signal in {', '.join(silent)}: in every seed no GRPO group held a reward contrast "
                   "(each group's rollouts all scored alike, e.g. all 0) and the weights did not move (||dW|| = 0), so "
                   "their final weights are their start weights and a difference of 0 between them is no measured "
                   "tie; give the policy train tasks it sometimes solves (partial credit, easier tasks, more "
                   "rollouts per group) before comparing them")
    for row in comparison.rows if comparison.budget else []:
        n, mine = comparison.budget, [r for r in comparison.runs if r.strategy == row.strategy]
        short = [r for r in mine if not r.budget_stop]
        if short:
            spent = ", ".join(f"{r.budget.get('rollouts', 0.0):.0f}" for r in short)
            out.append(f"{row.strategy} cannot reach the budget of {n} rollouts: its schedule ended first in "
                       f"{len(short)} of {len(row.seeds)} seed(s) (spent {spent}); raise rounds or the phase "
                       "lengths of a planned strategy, or compare at a smaller budget")
        cut = [r for r in mine if r.budget_stop and r.budget.get("rollouts", 0.0) < 0.9 * n]
        if cut:
            spent = ", ".join(f"{r.budget.get('rollouts', 0.0):.0f}" for r in cut)
            out.append(f"{row.strategy} stopped more than 10 % short of {n} rollouts in {len(cut)} seed(s) (spent "
                       f"{spent}): its next phase did not fit; smaller phases or a larger budget bring it closer")
    return out
