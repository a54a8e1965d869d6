"""``check``: static and local checks of each candidate, with at most one revision (Harness-S Table 8).

Static: the child spec validated when its patch applied (``edit``), and its rendered prompt fits its
context budget on at least the train tasks its parent's fits (``coevo.harnesses.fit``: the smaller of
its ``max_context_tokens`` and the policy's context, counted by the policy's tokenizer where it is local;
a task whose prompt does not fit ends before any model call); here its interface-mismatch
rate (TIMR, CoEvo-RSI) on a small train smoke run must not exceed the incumbent's by more than
``meta.max_timr_increase``. Local (optional): on ≤ 30 train tasks — the direction's failed tasks
plus ≤ 10 previously solved controls — the candidate must beat the incumbent's mean reward.
A spec that is valid but works against its use (a fixed decoding seed: ``harness_warnings``)
passes with a warning in ``cand.checks.warnings`` and the log.
Neither check scores a task whose answer went into a demonstration (the candidate's own or an
earlier candidate's): its score would measure copying, not repair.
A candidate identical to one the gate already rejected under the same checkpoint fails at once: the
same val tasks and seeds would give the same verdict (the evaluation is even reused by id).
A candidate that fails gets one revision from the editor, checked again.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from coevo.evaluation.results import EvalResult
from coevo.harnesses.fit import TokenMeter, meter_of, prompt_fit
from coevo.harnesses.spec import harness_warnings
from coevo.meta.context import MetaContext
from coevo.meta.sealing import sealed_tasks, unseal
from coevo.meta.state import Candidate, Direction, MetaState
from coevo.nodes.edit import realise, sealing
from coevo.records import Trajectory


async def _pair(ctx: MetaContext, state: MetaState, cand: Candidate,
                task_ids: list[str]) -> tuple[EvalResult, EvalResult]:
    """Incumbent (the candidate's parent) and candidate on the same train tasks and seeds, one rollout each."""
    tasks = ctx.tasks("train", ids=task_ids)
    return (await ctx.evaluate(cand.parent_id, state["checkpoint"], "train", tasks, k=1),
            await ctx.evaluate(cand.spec_id or "", state["checkpoint"], "train", tasks, k=1))


def demonstrated(state: MetaState, cand: Candidate) -> set[str]:
    """Train tasks a check must not score: those any live harness answers — accepted, pooled or
    pending, this round's other candidates included (``sealed_tasks``) — and those ``cand`` itself
    answers (docs/design.md, Principles)."""
    return sealed_tasks(state) | set(cand.demo_tasks)


def gated_before(state: MetaState, spec_id: str | None) -> str:
    """Why the gate needs not see ``spec_id`` again (``""``: it may): the round in which the gate
    rejected this very spec under the current checkpoint."""
    checkpoints = {h.round: h.checkpoint for h in state.get("history", [])}
    for d in state.get("decisions", []):
        if d.candidate_id == spec_id and not d.accepted and checkpoints.get(d.round) == state.get("checkpoint"):
            return f"the gate rejected this same harness under this checkpoint in round {d.round}"
    return ""


async def check_one(ctx: MetaContext, state: MetaState, cand: Candidate, direction: Direction,
                    solved: list[str]) -> str:
    """Run the checks on one candidate; returns ``""`` when it passes, else the failure reason.
    Fills ``cand.checks`` with the measured numbers. Tasks ``demonstrated`` answers are left out."""
    meta = ctx.config.meta
    cand.checks.warnings = [str(w) for w in harness_warnings(ctx.spec(cand.spec_id or ""))]
    for warning in cand.checks.warnings:
        ctx.log("check", f"{cand.id}: warning {warning}")
    if again := gated_before(state, cand.spec_id):
        return again
    prompts = [t.prompt for t in ctx.tasks("train")]
    # the policy's tokenizer and context, where it is local (no prompt to count: no policy needed)
    meter = meter_of(ctx.policy(state["checkpoint"])) if prompts else TokenMeter()
    fit = prompt_fit(ctx.spec(cand.spec_id or ""), prompts, meter=meter)
    parent_fit = prompt_fit(ctx.spec(cand.parent_id), prompts, meter=meter)
    if fit.over > parent_fit.over:  # no rollout needed: such tasks would end before any model call
        return f"context budget: {fit.text()}"
    excluded = demonstrated(state, cand)
    smoke = [t.id for t in ctx.tasks("train") if t.id not in excluded][: meta.smoke_tasks]
    if smoke:
        a, b = await _pair(ctx, state, cand, smoke)
        cand.checks.smoke_timr_incumbent, cand.checks.smoke_timr_candidate = a.timr, b.timr
        if b.timr > a.timr + meta.max_timr_increase:
            return f"TIMR on the smoke run rose from {a.timr:.2f} to {b.timr:.2f}"
    if meta.local_check:
        solved = [t for t in solved if t not in excluded]
        targets = [t for t in direction.task_ids if t not in excluded][: meta.local_tasks - min(meta.local_controls,
                                                                                                 len(solved))]
        local = targets + [s for s in solved if s not in targets][: meta.local_controls]
        cand.checks.local_tasks = len(local)
        if not local:  # every task it could score went into a demonstration: the gate decides alone
            return ""
        a, b = await _pair(ctx, state, cand, local)
        cand.checks.local_incumbent, cand.checks.local_candidate = a.mean_reward, b.mean_reward
        if b.mean_reward <= a.mean_reward:
            return (f"local check: mean reward {b.mean_reward:.3f} does not beat the incumbent's {a.mean_reward:.3f} "
                    f"on {len(local)} train tasks")
    return ""


async def check(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Check every proposed candidate of the round; revise a failing one once. Returns the
    candidates with status ``checked`` or ``rejected`` (and why) in ``checked``, and the ``sealed``
    update: a checked child stays pending with the tasks it answers; a rejected one, and a child a
    revision replaced, are removed, so their tasks return to the train set."""
    ctx = runtime.context
    rnd = state.get("round", 0)
    directions = {d.id: d for d in state.get("directions", [])}
    trajectories = ctx.archive.get_many(Trajectory, state.get("train_trajectories", []))
    solved = sorted({t.task_id for t in trajectories if t.passed})
    tasks = {t.id: t for t in ctx.tasks("train")}
    out, replaced = [], []
    for cand in state.get("candidates", []):
        cand = cand.model_copy(deep=True)  # the state's copy stays as ``edit`` left it
        first = cand.spec_id
        direction = directions[cand.direction]
        while cand.status == "proposed":
            reason = await check_one(ctx, state, cand, direction, solved)
            if not reason:
                cand.status = "checked"
            elif cand.revision < ctx.config.meta.revisions:
                ctx.record_edit(cand.model_copy(update={"status": "rejected", "reason": reason}), rnd)  # why revised
                cand = realise(ctx.editor.revise(direction, ctx.spec(cand.parent_id), cand, reason, tasks), ctx, rnd)
            else:
                cand.status, cand.reason = "rejected", reason
        ctx.record_edit(cand, rnd)
        ctx.log("check", f"{cand.id}: {cand.status} {cand.reason[:120]} "
                         f"{cand.checks.model_dump(exclude_none=True)}")
        out.append(cand)
        if first and first != cand.spec_id:
            replaced.append(first)
    return {"checked": out, "sealed": {**unseal(replaced, state), **sealing(out, state)}}
