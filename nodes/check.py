"""``check``: static and local checks of each candidate, with at most one revision (Harness-S Table 8).

Static: the child spec validated when its patch applied (``edit``); here its interface-mismatch
rate (TIMR, CoEvo-RSI) on a small train smoke run must not exceed the incumbent's by more than
``meta.max_timr_increase``. Local (optional): on ≤ 30 train tasks — the direction's failed tasks
plus ≤ 10 previously solved controls — the candidate must beat the incumbent's mean reward.
A candidate that fails gets one revision from the editor, checked again.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from coevo.harnesses.spec import HarnessSpec, load_harness
from coevo.meta.context import MetaContext, services
from coevo.nodes.edit import realise, record_edit
from coevo.meta.state import Candidate, Direction, MetaState


async def _pair(ctx: MetaContext, state: MetaState, inc: HarnessSpec, cand: HarnessSpec, task_ids: list[str]) -> tuple[Any, Any]:
    tasks = [t for t in ctx.tasks("train") if t.id in set(task_ids)]
    kw = dict(k=1, seeds=ctx.config.seed, model=ctx.policy(state["checkpoint"]), archive=ctx.archive,
              concurrency=ctx.config.eval.concurrency, progress=ctx.reporter, run_id=state["run_id"], tasks=tasks)
    return (await ctx.evaluate(inc, state["checkpoint"], ctx.env, "train", **kw),
            await ctx.evaluate(cand, state["checkpoint"], ctx.env, "train", **kw))


async def check_one(ctx: MetaContext, state: MetaState, cand: Candidate, direction: Direction, solved: list[str]) -> str:
    """Run the checks on one candidate; returns ``""`` when it passes, else the failure reason.
    Fills ``cand.checks`` with the measured numbers."""
    inc = load_harness(ctx.archive.get_harness(cand.parent_id).spec)
    child = load_harness(ctx.archive.get_harness(cand.spec_id).spec)
    meta = ctx.config.meta
    train_ids = [t.id for t in ctx.tasks("train")]
    if meta.smoke_tasks:
        a, b = await _pair(ctx, state, inc, child, train_ids[: meta.smoke_tasks])
        cand.checks.update(smoke_timr_incumbent=a.timr, smoke_timr_candidate=b.timr)
        if b.timr > a.timr + meta.max_timr_increase:
            return f"TIMR on the smoke run rose from {a.timr:.2f} to {b.timr:.2f}"
    if meta.local_check:
        targets = direction.task_ids[: meta.local_tasks - min(meta.local_controls, len(solved))]
        local = targets + [s for s in solved if s not in targets][: meta.local_controls]
        a, b = await _pair(ctx, state, inc, child, local)
        cand.checks.update(local_tasks=len(local), local_incumbent=a.mean_reward, local_candidate=b.mean_reward)
        if b.mean_reward <= a.mean_reward:
            return f"local check: mean reward {b.mean_reward:.3f} does not beat the incumbent's {a.mean_reward:.3f} on {len(local)} train tasks"
    return ""


async def check(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Check every proposed candidate of the round; revise a failing one once. Returns the
    candidates with status ``checked`` or ``rejected`` (and why) in ``checked``."""
    ctx = services(runtime)
    directions = {d["id"]: Direction(**d) for d in state.get("directions", [])}
    solved = sorted({t.task_id for i in state.get("train_trajectories", []) for t in ctx.archive.trajectories(id=i) if t.passed})
    tasks = {t.id: t for t in ctx.tasks("train")}
    out = []
    for raw in state.get("candidates", []):
        cand = Candidate(**raw)
        direction = directions[cand.direction]
        while cand.status == "proposed":
            reason = await check_one(ctx, state, cand, direction, solved)
            if not reason:
                cand.status = "checked"
            elif cand.revision < ctx.config.meta.revisions:
                spec = load_harness(ctx.archive.get_harness(cand.parent_id).spec)
                cand = realise(ctx.editor.revise(direction, spec, cand, reason, tasks), ctx, state["run_id"], state.get("round", 0))
            else:
                cand.status, cand.reason = "rejected", reason
        record_edit(ctx, cand, state["run_id"], state.get("round", 0))
        ctx.reporter.log(f"check  {cand.id}: {cand.status} {cand.reason[:120]} {cand.checks}")
        out.append(cand.model_dump())
    return {"checked": out}
