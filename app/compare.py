"""``coevo compare``: strategies run with matched budgets, splits and seeds, then compared on test
(VACE Table 2: the co-evolved pair against each lever alone and the ungated ablation).

Each (strategy, seed) is one ordinary ``run_meta`` run of the same config with only ``strategy``
and ``seed`` changed, so every run is in the archive like any other. Its run id is derived from the
config, the strategy and the seed (``compare_run_id``): running the comparison again reads a
finished run's final state back (LangGraph's public ``aget_state`` on the run's checkpointer,
``coevo.app.run.read_state``) instead of rerunning it, and resumes an interrupted one from its
last completed node.

The numbers (``summarise``), per strategy, on the test split's final pair (H[T], W[T]):

- **score**: the mean test reward over seeds, with a 95 % interval over test tasks: each task's
  reward is first averaged over the seeds, then ``score_estimate`` (Wilson when every
  seed-averaged value is 0 or 1, else a percentile bootstrap over tasks). Tasks are the independent
  draws; the seeds' spread is listed beside (``per_seed``), not folded into the interval.
- **vs reference** (VACE): the paired difference strategy − reference, paired per (seed, task) on
  the seeds both ran, resampled over tasks (``difference_estimate`` of the seed-averaged values);
  significant at 95 % when its interval excludes 0.
- **gate**: accepted / rejected gate decisions summed over seeds (VACE reports 17 of 44 proposals
  rejected), and candidates adopted without a gate (``ungated``).
- **effective-group rate**: the weight stages' mean fraction of GRPO groups holding both a success
  and a failure (Harness-S §3), from the stages' checkpoint metrics; None when nothing trained.
  Beside it the **reward-spread rate**: the mean over training steps of the fraction of groups whose
  rewards differ at all (``nonzero_std_rate``), which is what gives GRPO a gradient under partial
  credit even when no rollout fully passes.
- **no learning signal**: a strategy whose weight stages, in every seed, had no group with a reward
  contrast or any reward spread and moved the weights by ||ΔW|| = 0 (``no_learning_signal``) learned
  nothing it could; the table says so where a difference to the reference (also without a signal)
  would read as a measured tie, and a warning names every such strategy (``coevo.report.caveats``).
- **budget** (WHALE §6, VACE: methods compared at equal rollout budgets): each run's spend from the
  archive's budget rows (``coevo.meta.budget``): rollouts on train and val (test rollouts measure,
  they do not search), policy tokens, meta-LLM tokens and cost, as means over seeds; its
  **score-vs-rollouts curve** (cumulative rollouts at the end of each round against the incumbent's
  val score, averaged over seeds round by round); and the val score each strategy had reached at
  the **matched budget**, the smallest final rollout count among the strategies with a curve.

**At equal spend** (``compare(..., budget=N)``, ``coevo compare --budget N``): N rollouts on train +
val + search is what every strategy spends. Every run gets the cap (``RunConfig.budget``), and a
strategy whose ``rounds`` repeats one loop (``Strategy.open_ended``) gets ``rounds = N`` (a round
that spends anything spends a rollout, so the cap, not the rounds, ends it); a planned strategy
(stagewise, sia, WHALE's single-component baselines) keeps its configured schedule. A phase is cut
*before it starts*: each spending call declares its size (an evaluation tasks x k, a weight stage its
most rollouts) and the first one that would take the run past N ends the run there, before any of its
rollouts (``coevo.meta.budget``); so no run spends more than N, and one spends less by at most the
phase it could not afford. The strategy's own final test then runs, and the final pair is also
evaluated on val (``final_val``, measurement outside the cap). Each row then reports the test mean@k
with its interval at that spend, ``val_at_budget`` (that final val score, for every strategy) with its
interval, the spend by phase (``spent_by_phase``) and how each seed's run ended (``ended``: at the cap,
or its schedule ended first — a strategy that cannot reach N says so); ``warnings`` lists what keeps the
table from comparing at equal spend (``coevo.report.caveats``). Measurement that decides nothing (VACE's
``stage_effect``, the final test and final val) is reported beside the spend, not charged
(``coevo.meta.budget``).

**Protocols** (``protocol``): the papers compare under three, and a comparison runs under one:

- ``caps`` (neither cap; VACE Table 5): every strategy runs the configured ``rounds`` — at most that
  many weight stages (B_W) and gated proposals (B_H) — whatever it spends;
- ``budget`` (``--budget N``; WHALE §6's cumulative budgets): N rollouts on train + val + search (above);
- ``updates`` (``--updates N``; Harness-S Table 9, methods at equal optimiser updates): a training
  strategy's weight stages make at most N updates in all (``RunConfig.updates``: each stage declares its
  ``StageKind.updates``, GRPO optimiser steps or RSFT rounds, and the first that would overrun ends the run
  before it starts); an open-ended training strategy's ``rounds`` is raised to N so the cap ends it.

Under every protocol the ``reference`` runs first in each seed, and a planned strategy (``sia``,
``stagewise``, WHALE's single-component baselines) is matched to what the reference actually ran there:
its ``rounds`` is the reference's number of weight stages (``matched_rounds``), not the configured
``rounds``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any, Callable, Sequence

from coevo.app.comparison import Comparison, StrategyRow, StrategyRun
from coevo.app.run import anchored, read_state, run_meta
from coevo.config import ConfigError, RunConfig
from coevo.evaluation.stats import Estimate, difference_estimate, score_estimate
from coevo.graphs.registry import get_strategy
from coevo.meta.budget import by_phase, matched_budget, mean_curve, measured_by_phase, score_at, score_curve, totals
from coevo.meta.context import MetaContext
from coevo.meta.state import EvalSummary
from coevo.observe.progress import NullReporter, Reporter
from coevo.records import BudgetRecord, Checkpoint, RunRecord
from coevo.records.pairing import paired_tasks
from coevo.report.caveats import comparison_warnings, ended
from coevo.storage import Archive

log = logging.getLogger(__name__)

REFERENCE = "vace"


def protocol(config: RunConfig) -> str:
    """The comparison protocol ``config`` sets (module doc, "Protocols"): ``"budget"`` (a rollout cap),
    ``"updates"`` (an updates cap) or ``"caps"`` (neither: the configured rounds)."""
    return "budget" if config.budget else "updates" if config.updates else "caps"


def run_config(config: RunConfig, strategy: str, seed: int, matched: int | None = None) -> RunConfig:
    """``config`` with ``strategy`` and ``seed`` replaced (validated like any config). An open-ended
    strategy's ``rounds`` is raised to the cap under a rollout cap (``config.budget``), and, when it
    trains, under an updates cap (``config.updates``), so the cap ends it; a planned strategy's ``rounds``
    is ``matched`` when given (the rounds the reference ran in that seed; module doc)."""
    data = {**config.model_dump(mode="json"), "strategy": strategy, "seed": seed}
    row = get_strategy(strategy)
    if not row.open_ended:
        data["rounds"] = matched or config.rounds
    elif config.budget:
        data["rounds"] = max(config.rounds, config.budget)
    elif config.updates and row.trains:
        data["rounds"] = max(config.rounds, config.updates)
    return RunConfig.model_validate(data)


def _digest(config: RunConfig) -> str:
    """8 hex of the config minus where it is written (``db``, ``out_dir``)."""
    data = config.model_dump(mode="json", exclude={"db", "out_dir"})
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]


def compare_run_id(config: RunConfig, strategy: str, seed: int, matched: int | None = None) -> str:
    """The deterministic run id of ``strategy`` with ``seed`` under ``config`` (``matched``: as
    ``run_config``): ``cmp-<config digest>-<strategy>-s<seed>`` (same inputs, same id: the run is found
    again)."""
    return f"cmp-{_digest(run_config(config, strategy, seed, matched))}-{strategy}-s{seed}"


def _counts(state: dict[str, Any]) -> tuple[int, int, int]:
    """(accepted, rejected) gate decisions and candidates adopted without a gate, from the final state."""
    decisions = state.get("decisions", [])
    adopted = sum(c.fate == "adopted" for h in state.get("history", []) for c in h.candidates)
    return sum(d.accepted for d in decisions), sum(not d.accepted for d in decisions), adopted


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def stage_rates(archive: Archive, run_id: str) -> tuple[float | None, float | None]:
    """The run's weight stages from their checkpoint metrics: the mean of each stage's
    ``effective_group_rate``, and the mean over all their steps of ``nonzero_std_rate`` (groups
    with any reward spread). None when no stage recorded it."""
    metrics = [c.metrics or {} for c in archive.list(Checkpoint, run_id=run_id)]
    spread = [step.get("nonzero_std_rate") for m in metrics for step in m.get("history", [])]
    return _mean([m.get("effective_group_rate") for m in metrics]), _mean(spread)


def stage_update(archive: Archive, run_id: str) -> float | None:
    """The sum of the run's weight stages' own ||ΔW|| (``delta_norm`` in their checkpoint metrics;
    ``coevo.training.delta``); None when no stage recorded one."""
    norms = [(c.metrics or {}).get("delta_norm") for c in archive.list(Checkpoint, run_id=run_id)]
    present = [n for n in norms if n is not None]
    return float(sum(present)) if present else None


def no_learning_signal(run: StrategyRun) -> bool:
    """True when ``run`` trained weights but learned nothing it could: no GRPO group of any stage held a
    reward contrast or any reward spread (every rollout of a group scored alike, e.g. all 0), and its
    stages' ||ΔW|| is 0 (or not recorded beside a zero contrast). Its final weights are its start
    weights, so a difference of 0 to another such strategy is no measured tie. False for a run
    without a weight stage (nothing recorded)."""
    if run.effective_group_rate is None and run.delta_norm is None:
        return False
    return not (run.effective_group_rate or run.spread_rate or run.delta_norm)


def read_run(archive: Archive, state: dict[str, Any], strategy: str, seed: int, source: str,
             wall_s: float | None = None) -> StrategyRun:
    """A ``StrategyRun`` from a run's final ``state`` (``run_meta``'s result or ``read_state``'s)."""
    test = state.get("test") or {}
    accepted, rejected, adopted = _counts(state)
    effective, spread = stage_rates(archive, state["run_id"])
    budgets = archive.list(BudgetRecord, run_id=state["run_id"])
    return StrategyRun(strategy=strategy, seed=seed, run_id=state["run_id"], start=test.get("start"),
                       final=test.get("final"), accepted=accepted, rejected=rejected, adopted=adopted,
                       effective_group_rate=effective, spread_rate=spread,
                       delta_norm=stage_update(archive, state["run_id"]), budget=totals(budgets),
                       curve=score_curve(budgets, state.get("history", [])), source=source, wall_s=wall_s,
                       spent_by_phase=by_phase(budgets), measured_by_phase=measured_by_phase(budgets),
                       budget_stop=state.get("budget_stop", ""),
                       final_val=state.get("final_val"),
                       tests={k: v for k, v in test.items() if k not in ("start", "final") and v is not None},
                       rounds=[(h.round, h.incumbent, h.checkpoint) for h in state.get("history", [])],
                       stages=sum(":stage:" in b.id for b in budgets))


async def run_one(config: RunConfig, strategy: str, seed: int, archive: Archive, reporter: Reporter,
                  context_for: Callable[[RunConfig], MetaContext] | None = None,
                  matched: int | None = None) -> StrategyRun:
    """Run ``strategy`` with ``seed`` under ``config`` to the end, or read it back when its run (same
    id) already finished, or resume it when it started and stopped. ``context_for(run config)``
    replaces the default services (tests); ``matched``: a planned strategy's rounds (``run_config``)."""
    cfg = run_config(config, strategy, seed, matched)
    run_id = compare_run_id(config, strategy, seed, matched)
    record = archive.get(RunRecord, run_id)
    if record is not None and record.status == "done":
        state = await read_state(cfg.db, run_id, strategy)
        if state.get("test") is not None:
            return read_run(archive, state, strategy, seed, "reused")
    resume = record is not None and len(await read_state(cfg.db, run_id, strategy)) > 1
    log.info("%s seed %d: %s %s", strategy, seed, "resuming" if resume else "running", run_id)
    started, cpu = time.perf_counter(), time.process_time()
    context = context_for(cfg) if context_for is not None else None
    state = await run_meta(cfg, run_id=run_id, resume=resume, reporter=reporter, context=context, archive=archive)
    if "__interrupt__" in state:
        raise ConfigError(f"run {run_id} paused for gate approval; compare runs without approval: "
                          "set gate.approve = false in the config")
    run = read_run(archive, state, strategy, seed, "resumed" if resume else "ran", time.perf_counter() - started)
    run.cpu_s = time.process_time() - cpu
    return run


def _seed_means(run_list: Sequence[StrategyRun], which: str = "final") -> dict[str, float]:
    """Each test task's reward averaged over the runs (seeds) that have it, in the first run's task order."""
    values: dict[str, list[float]] = {}
    for run in run_list:
        summary: EvalSummary | None = getattr(run, which)
        for task_id, outcome in (summary.per_task if summary else {}).items():
            values.setdefault(task_id, []).append(outcome.mean_reward)
    return {t: sum(v) / len(v) for t, v in values.items()}


def _paired(runs: Sequence[StrategyRun], reference: Sequence[StrategyRun]) -> Estimate | None:
    """Strategy − reference paired per (seed, task) on the seeds both ran; each task's two sides are
    averaged over those seeds and the paired bootstrap resamples tasks. None when no seed pairs."""
    by_seed = {r.seed: r.final for r in reference if r.final is not None}
    sides: dict[str, tuple[list[float], list[float]]] = {}
    for run in runs:
        ref = by_seed.get(run.seed)
        if run.final is None or ref is None:
            continue
        for task_id in paired_tasks(run.final.per_task, ref.per_task):
            mine, theirs = sides.setdefault(task_id, ([], []))
            mine.append(run.final.per_task[task_id].mean_reward)
            theirs.append(ref.per_task[task_id].mean_reward)
    if not sides:
        return None
    reference_means = [sum(t) / len(t) for _, t in sides.values()]
    return difference_estimate(reference_means, [sum(m) / len(m) for m, _ in sides.values()])


def _phase_means(runs: Sequence[StrategyRun], field: str = "spent_by_phase") -> dict[str, float]:
    """Rollouts per phase (each run's ``field``: spent, or measured), means over ``runs`` (a phase a run
    lacks counts 0 there)."""
    per_run = [getattr(r, field) for r in runs]
    names = list(dict.fromkeys(p for phases in per_run for p in phases))
    return {p: sum(phases.get(p, 0.0) for phases in per_run) / len(runs) for p in names} if runs else {}


def summarise(comparison_id: str, runs: Sequence[StrategyRun], strategies: Sequence[str],
              reference: str = REFERENCE, config: dict[str, Any] | None = None, budget: int = 0) -> Comparison:
    """The comparison table from the runs (module docstring for each number); ``budget``: the
    rollout cap every run had (0: none)."""
    ref_runs = [r for r in runs if r.strategy == reference]
    rows = []
    for name in strategies:
        mine = sorted((r for r in runs if r.strategy == name), key=lambda r: r.seed)
        finals = _seed_means(mine)

        def spent(*keys: str) -> float:
            return sum(r.budget.get(k, 0.0) for r in mine for k in keys) / len(mine) if mine else 0.0

        rows.append(StrategyRow(
            strategy=name, seeds=[r.seed for r in mine], score=score_estimate(list(finals.values())),
            start=score_estimate(list(_seed_means(mine, "start").values())),
            per_seed=[r.final.score for r in mine if r.final is not None],
            vs_reference=None if name == reference or not ref_runs else _paired(mine, ref_runs),
            gated="gate" in get_strategy(name).build().nodes,
            accepted=sum(r.accepted for r in mine), rejected=sum(r.rejected for r in mine),
            adopted=sum(r.adopted for r in mine),
            effective_group_rate=_mean([r.effective_group_rate for r in mine]),
            spread_rate=_mean([r.spread_rate for r in mine]),
            no_signal=bool(mine) and all(no_learning_signal(r) for r in mine),
            trivial=next((r.final.trivial_baseline for r in mine if r.final is not None), None),
            rollouts=spent("rollouts"), policy_tokens=spent("policy_input_tokens", "policy_output_tokens"),
            policy_cost_usd=spent("policy_cost_usd"),
            meta_tokens=spent("meta_input_tokens", "meta_output_tokens"), meta_cost_usd=spent("meta_cost_usd"),
            curve=mean_curve([r.curve for r in mine]), spent_by_phase=_phase_means(mine),
            measured_by_phase=_phase_means(mine, "measured_by_phase"),
            ended=[ended(r, budget) for r in mine] if budget else []))
        if budget:
            vals = _seed_means(mine, "final_val")
            rows[-1].val_estimate = score_estimate(list(vals.values())) if vals else None
            rows[-1].val_at_budget = rows[-1].val_estimate.mean if vals else None
    matched = float(budget) if budget else matched_budget([r.curve for r in rows])
    if not budget:
        for row in rows:
            row.val_at_budget = score_at(row.curve, matched) if matched is not None else None
    n_test = max((len(r.final.per_task) for r in runs if r.final is not None), default=0)
    comparison = Comparison(id=comparison_id, reference=reference, rows=rows, runs=list(runs), n_test=n_test,
                            config=config or {}, matched_budget=matched, budget=budget)
    comparison.warnings = comparison_warnings(comparison)
    return comparison


def comparison_id(config: RunConfig, strategies: Sequence[str], seeds: Sequence[int]) -> str:
    """The comparison's own archive id: ``cmp-<config digest>`` plus a digest of strategies and seeds."""
    tail = hashlib.sha256(json.dumps([list(strategies), list(seeds)]).encode()).hexdigest()[:6]
    return f"cmp-{_digest(config.model_copy(update={'strategy': REFERENCE, 'seed': 0}))}-{tail}"


async def compare(config: RunConfig, strategies: Sequence[str], seeds: int | Sequence[int] = 3,
                  reporter: Reporter | None = None, archive: Archive | None = None,
                  context_for: Callable[[RunConfig], MetaContext] | None = None,
                  reference: str = REFERENCE, budget: int | None = None, updates: int | None = None) -> Comparison:
    """Run (or read back) every strategy × seed under ``config`` and summarise them.

    ``budget``: N rollouts on train + val + search every run spends (module doc, "At equal spend";
    it sets ``config.budget``; None keeps the config's, 0 none); ``updates``: N weight updates every
    training run makes (``config.updates``, the same way; module doc, "Protocols"). Within a seed the
    ``reference`` runs first and each planned strategy gets the rounds it ran (``matched_rounds``).
    ``seeds``: a count n (seeds ``config.seed .. config.seed + n - 1``) or explicit seeds. Paths in
    ``config`` are made absolute first (``anchored``), so the run ids name the same files from any
    working directory. Runs go
    seed by seed, every strategy within a seed, so a comparison stopped early still pairs whole
    seeds. The comparison itself is stored as a run record (strategy ``compare``) listing its runs.
    Raises ``ConfigError`` (a ``ValueError``) for an unknown strategy, an empty strategy list, no seed, a
    negative cap, or both caps at once.
    """
    names = list(dict.fromkeys(strategies))
    if not names:
        raise ConfigError("--strategies is empty: name at least one strategy, e.g. vace,rl_only")
    for name in names:
        get_strategy(name)  # ValueError naming the valid strategies
    seed_list = [config.seed + i for i in range(seeds)] if isinstance(seeds, int) else list(seeds)
    if not seed_list:
        raise ConfigError("--seeds must be at least 1")
    if budget is not None:
        if budget < 0:
            raise ConfigError(f"--budget {budget}: a rollout budget is a count of rollouts >= 1 (0: no budget)")
        config = config.model_copy(update={"budget": budget})
    if updates is not None:
        if updates < 0:
            raise ConfigError(f"--updates {updates}: an updates cap is a count of weight updates >= 1 (0: none)")
        config = config.model_copy(update={"updates": updates})
    if config.budget and config.updates:
        raise ConfigError(f"budget = {config.budget} and updates = {config.updates}: a comparison has one protocol, "
                         "equal rollouts (--budget) or equal updates (--updates); drop one of them")
    config = anchored(config)
    archive = archive or Archive(config.db)
    reporter = reporter or NullReporter()
    cid = comparison_id(config, names, seed_list)
    record = RunRecord(id=cid, strategy="compare", config={
        "run": config.model_dump(mode="json"), "strategies": names, "seeds": seed_list,
        "runs": {f"{s}/{seed}": compare_run_id(config, s, seed) for seed in seed_list for s in names}})
    archive.put(record)
    runs = []
    first = [reference] if reference in names else []
    for seed in seed_list:
        ref_run = None
        for name in first + [n for n in names if n != reference]:
            matched = matched_rounds(ref_run, name)
            runs.append(await run_one(config, name, seed, archive, reporter, context_for, matched))
            if name == reference:
                ref_run = runs[-1]
    runs.sort(key=lambda r: (r.seed, names.index(r.strategy)))
    archive.update_run(record.id, status="done")
    comparison = summarise(cid, runs, names, reference, record.config, budget=config.budget)
    comparison.protocol, comparison.updates = protocol(config), config.updates
    return comparison


def matched_rounds(reference: StrategyRun | None, strategy: str) -> int | None:
    """The rounds a planned ``strategy`` (``Strategy.open_ended`` False: sia, stagewise, WHALE's
    single-component baselines) runs in a seed: the weight stages the ``reference`` run made in that seed
    (at least 1), so it is matched to what the reference actually ran rather than to the configured
    ``rounds`` (VACE Table 5's B_W and B_H; WHALE §6's cumulative budgets); None for an open-ended
    strategy or without a reference run."""
    if reference is None or get_strategy(strategy).open_ended or strategy == reference.strategy:
        return None
    return max(1, reference.stages)
