"""PACE's own nodes: ``pace_plan`` (frozen weights, the prompt phase first) and ``pace_step`` (its
two timescales: a phase ends after ``pace.patience`` gated iterations without a validated gain,
and the prompt phase hands over to the control-logic phase). The PACE abstract puts the stopping
decision on held-out validation gains: the gate's verdicts.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from coevo.graphs.pace.state import PaceState
from coevo.harnesses.patch import CONTROL_FIELDS, PROMPT_FIELDS
from coevo.meta.context import MetaContext
from coevo.meta.search import Plan
from coevo.nodes.search import close_phase, iteration_record
from coevo.records import Phase


def pace_plan(state: PaceState, runtime: Runtime[MetaContext]) -> dict:
    """PACE's plan: frozen weights, one cycle, the prompt phase first (edits confined to
    ``PROMPT_FIELDS``), each phase at most ``rounds`` iterations."""
    ctx = runtime.context
    plan = Plan(strategy=ctx.config.strategy, cycles=1, weight_epochs=0.0, search_iterations=ctx.config.rounds,
                adaptive=False, fields=list(PROMPT_FIELDS))
    ctx.log("plan", f"{plan.model_dump_json()}")
    return {"plan": plan, "fields": plan.fields, "phase_kind": "prompt"}


def pace_step(state: PaceState, runtime: Runtime[MetaContext]) -> dict:
    """PACE's two timescales after each gated iteration (``gate`` then ``next_round``): records the
    iteration (its accepted harness, val score, whether the gate accepted: a validated gain); a
    phase ends after ``pace.patience`` iterations in a row without a validated gain or after
    ``plan.search_iterations``; the prompt phase then hands over to the control-logic phase
    (fields ``CONTROL_FIELDS``: hooks, parser, budget, tool view, context), which ends the search."""
    ctx = runtime.context
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
    patience = ctx.config.pace.patience
    limit = state["plan"].search_iterations
    reason = (f"no validated gain for {stale} iterations (pace.patience = {patience})" if stale >= patience
              else f"reached {limit} iterations" if len(mine) >= limit else "")
    out: dict = {"search_iterations": [now], "phase_done": False}
    if not reason:
        return out
    record = Phase(index=phase, cycle=0, kind=kind, length=len(mine), unit="iterations", steps=len(mine),
                   harness_id=incumbent, checkpoint=state["checkpoint"], signal=[s.score for s in mine],
                   stop_reason=reason, fields=state.get("fields"))
    record = close_phase(ctx, record, state.get("phase_started"))
    ctx.log("phase", f"{phase} {kind}: {len(mine)} iterations; {reason}")
    if kind == "prompt":
        return {**out, "phases": [record], "phase": phase + 1, "phase_kind": "control", "fields": list(CONTROL_FIELDS),
                "phase_started": record.ended_at}
    return {**out, "phases": [record], "phase_done": True}
