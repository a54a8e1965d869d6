"""What a comparison's table cannot claim, said beside it (``coevo compare``): one sentence per
caveat, from a ``coevo.app.compare.Comparison``, printed above and under the table and listed in the
report. This module is the one place such checks go: ``separation_warnings`` (what keeps the table from
separating its strategies: too few test tasks, wide intervals, one gate try, one seed) and
``comparison_warnings`` (at a budget, strategies that cannot reach it or stopped well short of it;
strategies with no learning signal); ``ended`` says how one run at a budget ended.
"""

from __future__ import annotations

import statistics
from typing import Any

from coevo.meta.budget import cut_call
from coevo.report.power import MIN_DIFFERENCE, separable_difference, tasks_needed


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


def separation_warnings(comparison: Any) -> list[str]:
    """What keeps ``comparison`` (a ``coevo.app.compare.Comparison``) from separating its strategies:
    too few test tasks for a difference of ``MIN_DIFFERENCE`` (``separable_difference``), paired
    intervals wider than every difference measured, at most one harness proposal reaching a gate
    per run, one seed. Empty when none applies."""
    out = []
    n = comparison.n_test
    smallest = separable_difference(n)
    if smallest > MIN_DIFFERENCE:
        out.append(f"{n} test tasks: no paired difference below {smallest:.2f} can be told from 0 at 95 %, even "
                   f"when no task gets worse; raise env.n_test (≥ {tasks_needed(MIN_DIFFERENCE)} tasks resolve "
                   f"{MIN_DIFFERENCE:.2f})")
    diffs = [r.vs_reference for r in comparison.rows if r.vs_reference is not None and r.vs_reference.n]
    if diffs and not any(d.excludes_zero for d in diffs):
        width = statistics.median(d.half_width for d in diffs)
        largest = max(abs(d.mean) for d in diffs)
        if width > largest:
            out.append(f"no strategy differs from {comparison.reference} at 95 %: the paired intervals are "
                       f"±{width:.2f} wide (median), wider than any difference measured ({largest:.2f} at most), so "
                       "the table cannot rank these strategies")
    refining = [r for r in comparison.rows if r.gated and r.seeds and r.strategy in _refines(comparison)]
    if refining:
        most = max((r.accepted + r.rejected) / len(r.seeds) for r in refining)
        if most <= 1:
            out.append(f"at most {most:.0f} harness proposal per run reached a gate "
                       f"({', '.join(r.strategy for r in refining)}): one try cannot show what the harness lever "
                       "is worth; raise rounds or meta.candidates (or the budget)")
    seeds = max((len(r.seeds) for r in comparison.rows), default=0)
    if seeds == 1:
        out.append("one seed per strategy: how much a strategy's score moves from seed to seed is unknown, so a "
                   "difference may be one training run's luck; use --seeds 3 or more")
    return out


def _refines(comparison: Any) -> set[str]:
    """The strategies of ``comparison`` that propose harnesses (their strategy row names an editor or
    proposer role)."""
    from coevo.strategies import STRATEGIES

    return {r.strategy for r in comparison.rows if r.strategy in STRATEGIES
            and {"editor", "proposer"} & set(STRATEGIES[r.strategy].roles)}
