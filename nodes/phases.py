"""Phase scheduling of the alternating strategies: each strategy's ``plan`` (WHALE §4 fixed or
adaptive, FST's prompt-only search, stagewise's one long phase each; PACE's two timescales), the
weight phase's options and record (WHALE §3.1's persistent sampler, budget in epochs), and PACE's
phase switch. Every stopping decision here reads training signals only, except PACE's, which the
PACE abstract puts on held-out validation gains.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from langgraph.runtime import Runtime

from coevo.harnesses.patch import CONTROL_FIELDS, PROMPT_FIELDS
from coevo.meta.context import MetaContext, services
from coevo.meta.state import MetaState, Phase, Plan, SearchIteration
from coevo.timestamps import utcnow
from coevo.training.schedule import Patience, PersistentSampler, epochs_to_steps


def _plan(strategy: str, **overrides: Any) -> Callable[[MetaState, Runtime[MetaContext]], dict]:
    def plan(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
        config = services(runtime).config
        w = config.whale
        values = {"strategy": strategy, "cycles": config.rounds, "weight_epochs": w.weight_epochs,
                  "search_iterations": w.search_iterations, "adaptive": w.schedule == "adaptive", "fields": None}
        for key, value in overrides.items():
            values[key] = value(config) if callable(value) else value
        plan = Plan(**values)
        services(runtime).reporter.log(f"plan   {plan.model_dump_json()}")
        return {"plan": plan, "fields": plan.fields, "sampler_position": state.get("sampler_position", 0),
                "phase_kind": "prompt" if strategy == "pace" else ""}

    plan.__doc__ = f"Write the run's phase plan for strategy {strategy!r} (``Plan``; module doc)."
    return plan


whale_plan = _plan("whale")
"""WHALE (§4): ``rounds`` cycles; fixed phase lengths or the adaptive patience rule (``whale.schedule``)."""
fst_plan = _plan("fst", fields=list(PROMPT_FIELDS))
"""FST (WHALE §5's control): WHALE's schedule, harness edits confined to the system and user prompts."""
stagewise_plan = _plan("stagewise", cycles=1, adaptive=False,
                       weight_epochs=lambda c: c.rounds * c.whale.weight_epochs,
                       search_iterations=lambda c: c.rounds * c.whale.search_iterations)
"""Stagewise (WHALE §6): one weight phase and one search phase holding WHALE's cumulative fixed budgets."""
pace_plan = _plan("pace", cycles=1, adaptive=False, weight_epochs=0.0, fields=list(PROMPT_FIELDS),
                  search_iterations=lambda c: c.rounds)
"""PACE: frozen weights, prompt phase first; each PACE phase runs at most ``rounds`` iterations."""


def close_phase(ctx: MetaContext, phase: Phase, started: datetime | None) -> Phase:
    """``phase`` with its start (``started``, UTC) and end (now) times, recorded under the run as
    ``<run id>-phase<index>`` so budgets can be attributed per phase."""
    phase = Phase.model_validate({**phase.model_dump(), "id": f"{ctx.run_id}-phase{phase.index}", "run_id": ctx.run_id,
                                  "started_at": started, "ended_at": utcnow()})
    ctx.record(phase)
    return phase


def weight_phase(ctx: MetaContext, state: MetaState, n_tasks: int) -> dict[str, Any]:
    """The trainer options of a WHALE weight phase on ``n_tasks`` train tasks: the run's persistent
    sampler at ``state["sampler_position"]`` over all the run's train tasks (``stream``: those a
    demonstration answers are passed over, so each epoch still visits every other task once), a
    length in steps from the plan's epochs (fixed) or ``whale.max_epochs`` with the patience rule in
    steps (adaptive: minimum, patience and window from ``whale.min_epochs``/``patience_epochs``/
    ``window_epochs``)."""
    plan, cfg, tps = state["plan"], ctx.config.whale, ctx.config.train.tasks_per_step

    def steps(epochs: float) -> int:
        return epochs_to_steps(epochs, n_tasks, tps)

    options: dict[str, Any] = {"sampler": PersistentSampler(ctx.config.seed), "stream": ctx.tasks("train"),
                               "position": state.get("sampler_position", 0),
                               "max_steps": steps(cfg.max_epochs if plan.adaptive else plan.weight_epochs)}
    if plan.adaptive:
        options["stop"] = Patience(steps(cfg.min_epochs), steps(cfg.patience_epochs), steps(cfg.window_epochs)).stop
    return options


def weight_phase_end(ctx: MetaContext, state: MetaState, options: dict[str, Any], metrics: dict[str, Any],
                     checkpoint: str, started: datetime) -> dict:
    """The state update closing a weight phase: its ``Phase`` (length in epochs, reward per step,
    why it stopped), the advanced ``phase`` and the sampler position the next phase starts from."""
    plan, phase = state["plan"], state.get("phase", -1) + 1
    rewards = [h["reward"] for h in metrics.get("history", [])]
    reason = metrics.get("stop_reason") or (
        f"reached whale.max_epochs = {ctx.config.whale.max_epochs:g}" if plan.adaptive
        else f"fixed length: {plan.weight_epochs:g} epochs")
    record = Phase(index=phase, cycle=state.get("round", 0), kind="weights", length=metrics.get("epochs", 0.0),
                   unit="epochs", steps=len(rewards), harness_id=state["incumbent"], checkpoint=checkpoint,
                   signal=rewards, stop_reason=reason)
    record = close_phase(ctx, record, started)
    ctx.reporter.log(f"phase  {phase} weights: {record.length:.2f} epochs in {record.steps} steps; {reason}")
    position = metrics.get("sampler_position", options["position"] + len(rewards) * ctx.config.train.tasks_per_step)
    return {"phases": [record], "phase": phase, "phase_kind": "weights", "sampler_position": position}


def iteration_record(state: MetaState, accepted: str, score: float, changed: bool) -> SearchIteration:
    """The ``SearchIteration`` of the running phase's latest iteration (its candidates from ``checked``)."""
    checked = state.get("checked", [])
    return SearchIteration(phase=state.get("phase", 0), cycle=state.get("round", 0),
                           iteration=state.get("iteration", 0),
                           accepted=accepted, score=score, changed=changed,
                           candidates=[c.spec_id or "" for c in checked if c.status == "checked"],
                           rejected=[f"{c.id}: {c.reason}" for c in checked if c.status == "rejected"])


def pace_step(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """PACE's two timescales after each gated iteration (``gate`` then ``next_round``): records the
    iteration (its accepted harness, val score, whether the gate accepted: a validated gain); a
    phase ends after ``whale.pace_patience`` iterations in a row without a validated gain or after
    ``plan.search_iterations``; the prompt phase then hands over to the control-logic phase
    (fields ``CONTROL_FIELDS``: hooks, parser, budget, tool view, context), which ends the search."""
    ctx = services(runtime)
    kind, phase, incumbent = state.get("phase_kind") or "prompt", state.get("phase", 0), state["incumbent"]
    last = state.get("round", 1) - 1  # next_round has closed the iteration's round
    gained = any(d.accepted for d in state.get("decisions", []) if d.round == last)
    val = state.get("validation", {})
    now = iteration_record(state, incumbent, val[incumbent].score if incumbent in val else 0.0, gained)
    now.cycle = last
    mine = [s for s in state.get("search_iterations", []) if s.phase == phase] + [now]
    stale = 0
    for s in reversed(mine):
        if s.changed:
            break
        stale += 1
    patience = ctx.config.whale.pace_patience
    limit = state["plan"].search_iterations
    reason = (f"no validated gain for {stale} iterations (whale.pace_patience = {patience})" if stale >= patience
              else f"reached {limit} iterations" if len(mine) >= limit else "")
    out: dict = {"search_iterations": [now], "phase_done": False}
    if not reason:
        return out
    record = Phase(index=phase, cycle=0, kind=kind, length=len(mine), unit="iterations", steps=len(mine),
                   harness_id=incumbent, checkpoint=state["checkpoint"], signal=[s.score for s in mine],
                   stop_reason=reason, fields=state.get("fields"))
    record = close_phase(ctx, record, state.get("phase_started"))
    ctx.reporter.log(f"phase  {phase} {kind}: {len(mine)} iterations; {reason}")
    if kind == "prompt":
        return {**out, "phases": [record], "phase": phase + 1, "phase_kind": "control", "fields": list(CONTROL_FIELDS),
                "phase_started": record.ended_at}
    return {**out, "phases": [record], "phase_done": True}
