"""PACE's state (``PaceState``: the search state plus its phase plan and the kind of the phase
running now, prompt then control) and its own nodes: ``pace_plan`` (frozen weights, the prompt
phase first; ``plan_for`` makes the single-mode baselines' plans) and ``pace_step`` (its two
timescales: a phase ends after ``pace.patience`` gated iterations without a validated gain, and the
prompt phase hands over to the control-logic phase). The PACE abstract puts the stopping decision
on held-out validation gains: the gate's verdicts.
"""

from __future__ import annotations

from typing import Callable, Literal

from langgraph.runtime import Runtime

from coevo.harnesses.patch import CONTROL_FIELDS, PROMPT_FIELDS
from coevo.meta.context import MetaContext
from coevo.meta.search import Plan, SearchState
from coevo.nodes.search import close_phase, iteration_record
from coevo.records import Phase

TIMESCALES = {"prompt": PROMPT_FIELDS, "control": CONTROL_FIELDS}
"""Each PACE timescale's editable fields: prompt edits, then control logic (hooks, parser, budget,
tool view, context)."""


class PaceState(SearchState, total=False):
    """``SearchState`` plus PACE's plan and running phase kind."""

    plan: Plan
    """Replaced once by ``pace_plan``."""
    phase_kind: Literal["prompt", "control"]
    """Replaced: the timescale running now (``pace_plan`` starts with ``prompt``, ``pace_step``
    switches to ``control``)."""
    timescales: list[Literal["prompt", "control"]]
    """Replaced: the timescales still to run after this one (PACE: ``["control"]`` during the
    prompt phase; its single-mode baselines: none)."""


def plan_for(*kinds: str) -> Callable[[PaceState, Runtime[MetaContext]], dict]:
    """The plan node of a PACE strategy whose phases are the timescales ``kinds`` in order (PACE:
    ``prompt``, ``control``; its single-mode baselines: one of them)."""

    def pace_plan(state: PaceState, runtime: Runtime[MetaContext]) -> dict:
        ctx = runtime.context
        plan = Plan(strategy=ctx.config.strategy, cycles=1, weight_epochs=0.0, search_iterations=ctx.config.rounds,
                    adaptive=False, fields=list(TIMESCALES[kinds[0]]))
        ctx.log("plan", f"{plan.model_dump_json()}")
        return {"plan": plan, "fields": plan.fields, "phase_kind": kinds[0], "timescales": list(kinds[1:])}

    pace_plan.__doc__ = (f"PACE's plan with timescales {', '.join(kinds)}: frozen weights, one cycle, the "
                         f"{kinds[0]} phase first (edits confined to its ``TIMESCALES`` fields), each phase at "
                         "most ``rounds`` iterations.")
    return pace_plan


pace_plan = plan_for("prompt", "control")
"""PACE: the prompt phase, then the control-logic phase."""
prompt_only_plan = plan_for("prompt")
"""PACE's prompt-only single-mode baseline: the prompt phase alone."""
control_only_plan = plan_for("control")
"""PACE's control-only single-mode baseline: the control-logic phase alone."""


def pace_step(state: PaceState, runtime: Runtime[MetaContext]) -> dict:
    """PACE's two timescales after each gated iteration (``gate`` then ``next_round``): records the
    iteration (its accepted harness, val score, whether the gate accepted: a validated gain); a
    phase ends after ``pace.patience`` iterations in a row without a validated gain or after
    ``plan.search_iterations``; the phase then hands over to the next timescale of the plan
    (``state["timescales"]``; PACE: prompt, then control logic, fields ``CONTROL_FIELDS``: hooks,
    parser, budget, tool view, context), and the last one ends the search."""
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
    rest = state.get("timescales", ["control"] if kind == "prompt" else [])
    if rest:
        return {**out, "phases": [record], "phase": phase + 1, "phase_kind": rest[0],
                "fields": list(TIMESCALES[rest[0]]), "timescales": rest[1:], "phase_started": record.ended_at}
    return {**out, "phases": [record], "phase_done": True}
