"""What ``coevo compare`` produces (``coevo.app.compare`` runs it): one ``StrategyRun`` per (strategy,
seed), one ``StrategyRow`` per strategy (means over its seeds, its paired difference to the reference)
and the ``Comparison`` that holds them with its budget and caveats."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from coevo.evaluation.stats import Estimate
from coevo.meta.budget import CurvePoint
from coevo.meta.state import EvalSummary


class StrategyRun(BaseModel):
    """One (strategy, seed) run as the comparison reads it: the test evaluations of the start pair
    (H0, W0) and the final pair, gate counts, the weight stages' effective-group rate (None: no
    stage reported one) and reward-spread rate, ``delta_norm`` the sum of its weight stages' ||ΔW||
    (``coevo.training.delta``; None: no stage recorded one), its spend (``budget``: ``coevo.meta.budget.totals``, test
    rollouts excluded) and score-vs-rollouts ``curve``, and how it was obtained: ``ran`` now (``wall_s`` its
    wall seconds, ``cpu_s`` the process's CPU seconds meanwhile, all threads), ``resumed`` or ``reused``
    (finished before; nothing ran); at a budget, its rollouts per phase, why the cap stopped it ("" when
    its schedule ended first) and the final pair's val score; ``measured_by_phase``: rollouts of
    phases that measure rather than decide (``coevo.meta.budget.measured_by_phase``: reported, not charged);
    ``tests``: the run's other final test evaluations by name (Harness-S's ``rank1``, ``rank2``, ...: the final
    policy under Rank-r routing), beside ``final``; ``rounds``: each round summary's (round, incumbent harness,
    checkpoint), the pairs the run held round by round; ``stages``: the weight stages it made."""

    strategy: str
    seed: int
    run_id: str
    start: EvalSummary | None = None
    final: EvalSummary | None = None
    accepted: int = 0
    rejected: int = 0
    adopted: int = 0
    effective_group_rate: float | None = None
    spread_rate: float | None = None
    delta_norm: float | None = None
    budget: dict[str, float] = Field(default_factory=dict)
    curve: list[CurvePoint] = Field(default_factory=list)
    source: str = "ran"
    wall_s: float | None = None
    cpu_s: float | None = None
    spent_by_phase: dict[str, float] = Field(default_factory=dict)
    measured_by_phase: dict[str, float] = Field(default_factory=dict)
    budget_stop: str = ""
    final_val: EvalSummary | None = None
    tests: dict[str, EvalSummary] = Field(default_factory=dict)
    rounds: list[tuple[int, str, str]] = Field(default_factory=list)
    stages: int = 0


class StrategyRow(BaseModel):
    """A strategy's line of the comparison (module docstring): ``score`` of the final pair on test,
    ``start`` of the start pair, ``per_seed`` final scores in seed order, ``vs_reference`` (None for
    the reference itself or when it did not run), gate counts summed over seeds, mean effective-group
    and reward-spread rates over the seeds that trained, ``no_signal`` (``no_learning_signal`` in every
    seed: its weight stages had no reward contrast and made no update), the trivial-policy baseline on test, and the
    budget: mean ``rollouts`` (train + val), ``policy_tokens``, ``policy_cost_usd``, ``meta_tokens``
    and ``meta_cost_usd`` over seeds, the seed-mean ``curve`` and ``val_at_budget`` (its val score at the comparison's
    matched budget). At a budget (module doc): ``val_at_budget`` is the final pair's val score at the
    cap (``val_estimate`` with its interval over val tasks), ``spent_by_phase`` the mean rollouts per
    phase, ``measured_by_phase`` the mean rollouts per measuring phase (not charged) and ``ended`` how
    each seed's run ended."""

    strategy: str
    seeds: list[int]
    score: Estimate
    start: Estimate
    per_seed: list[float]
    vs_reference: Estimate | None = None
    gated: bool = True
    accepted: int = 0
    rejected: int = 0
    adopted: int = 0
    effective_group_rate: float | None = None
    spread_rate: float | None = None
    no_signal: bool = False
    trivial: float | None = None
    rollouts: float = 0.0
    policy_tokens: float = 0.0
    policy_cost_usd: float = 0.0
    meta_tokens: float = 0.0
    meta_cost_usd: float = 0.0
    curve: list[CurvePoint] = Field(default_factory=list)
    val_at_budget: float | None = None
    val_estimate: Estimate | None = None
    spent_by_phase: dict[str, float] = Field(default_factory=dict)
    measured_by_phase: dict[str, float] = Field(default_factory=dict)
    ended: list[str] = Field(default_factory=list)


class Comparison(BaseModel):
    """The whole comparison: its id, the ``reference`` strategy, one row per strategy (the order
    asked for), every run, the number of test tasks, and the ``matched_budget`` (rollouts) at which
    the rows' ``val_at_budget`` are read (None: no strategy has a curve); ``budget``: the rollout cap
    every run had (0: none; then ``matched_budget`` is N); ``updates``: the updates cap every run had (0:
    none); ``protocol``: ``caps``, ``budget`` or ``updates`` (``coevo.app.compare.protocol``); ``warnings``
    (``coevo.report.caveats``)."""

    id: str
    reference: str
    rows: list[StrategyRow]
    runs: list[StrategyRun]
    n_test: int
    config: dict[str, Any] = Field(default_factory=dict)
    matched_budget: float | None = None
    budget: int = 0
    updates: int = 0
    protocol: str = "caps"
    warnings: list[str] = Field(default_factory=list)
