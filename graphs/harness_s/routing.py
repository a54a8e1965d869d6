"""Harness-S's nodes after the evolution: ``profile`` (policy-aware profile re-anchoring, Eq. 11,
Alg. 1 lines 1, 3 and 14), ``rescue_train`` (complementary rescue training, Alg. 1 and Eq. 5 with
the router's top-K, Eq. 10) and ``routed_test`` (the final test under H0 and Rank-r routing, Eq. 12
and Table 5).

``profile``: with the policy of checkpoint s frozen, every pool member runs the val tasks with the
same seeds and limits as H0 (paired executions), and the profiler turns each sibling's outcomes
against H0's into P_i^(s). Only val evaluations are read: test outcomes never enter a profile.
Profiles are stored per checkpoint (``MetaContext.record_profiles``) and replace the state's
``profiles``.
"""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from coevo.envs.base import Task
from coevo.graphs.harness_s.router import Router
from coevo.graphs.harness_s.state import HarnessSState
from coevo.meta.context import MetaContext
from coevo.meta.state import EvalSummary
from coevo.nodes.loop import run_stage, val_at_budget
from coevo.observe.text import plain
from coevo.records import Trajectory
from coevo.training.harness_s import routed


def pool_ids(state: HarnessSState) -> list[str]:
    """The pool's harness ids, each once, in the order they joined (H0 first)."""
    return list(dict.fromkeys([state["start_harness"], *(m.harness_id for m in state.get("pool", []))]))


async def profile(state: HarnessSState, runtime: Runtime[MetaContext]) -> dict:
    """Re-anchor the profiles at the current checkpoint (module doc). Returns ``profiles`` (harness
    id -> ``Profile``) and ``validation`` (each pool member's val evaluation at this checkpoint).
    A profiler reply that is ignored (malformed) is logged with its reason."""
    ctx = runtime.context
    checkpoint, h0 = state["checkpoint"], state["start_harness"]
    evals = {h: EvalSummary.of(await ctx.evaluate(h, checkpoint, "val")) for h in pool_ids(state)}
    val_tasks = {t.id: t for t in ctx.tasks("val")}
    trajectories = {t.id: t for e in evals.values()
                    for t in ctx.archive.list(Trajectory, evaluation_id=e.evaluation_id)}
    profiles = {}
    for h, summary in evals.items():
        out = ctx.profiler.profile(summary, evals[h0], val_tasks, trajectories)
        ctx.store_calls(out.calls)
        if out.profile.reason:
            ctx.log("profile", f"{h[:12]}: profiler reply ignored: {out.profile.reason[:200]}")
        profiles[h] = out.profile
    ctx.record_profiles(state.get("round", 0), checkpoint, profiles)
    ctx.log("profile", f"at {checkpoint}: " + ", ".join(
        f"{h[:8]} val {p.val_success:.2f} (+{len(p.prefer)}/-{len(p.avoid)})" for h, p in profiles.items()))
    return {"profiles": profiles, "validation": evals}


def make_router(ctx: MetaContext, state: HarnessSState) -> Router:
    """The run's router over the pool's current profiles (``state["profiles"]``, H0 = the start
    harness) with the context's voters; ballots and voter LLM calls are archived under the run."""
    hs = ctx.config.harness_s
    return Router(ctx.voter, state.get("profiles", {}), {t.id: t for t in ctx.tasks("val")}, state["start_harness"],
                  ballot=hs.ballot, seed=ctx.config.seed, checkpoint_id=state["checkpoint"], on_votes=ctx.record_votes,
                  on_calls=ctx.store_calls)


async def rescue_train(state: HarnessSState, runtime: Runtime[MetaContext]) -> dict:
    """One weight stage under H0 with complementary rescue (Harness-S Alg. 1): a task whose K
    rollouts all fail is re-rolled once under each of the router's top-K siblings (``harness_s.rescue_k``,
    0: K = the group size), and that group replaces it (Eq. 5). Returns ``train``'s update; the
    stage's rescue trigger rate, rescue success and effective-group rate are in ``stage``."""
    ctx = runtime.context
    router = make_router(ctx, state)
    siblings = [ctx.spec(h) for h in router.pool if h != router.h0]

    async def route(task: Task, k: int) -> list[str]:
        return await router.top_k(task, ctx.config.harness_s.rescue_k or k)

    checkpoint, trajectories, stage = await run_stage(ctx, state, ctx.spec(state["incumbent"]), state["checkpoint"],
                                                      routed(ctx.config.train, siblings, route))
    return {"checkpoint": checkpoint, "train_trajectories": [t.id for t in trajectories], "stage": stage}


def merge_summaries(parts: list[EvalSummary], label: str) -> EvalSummary:
    """One summary of evaluations on disjoint task sets (each task under the harness the router
    chose for it): per-task outcomes joined; score, pass@k and avg@k averaged over tasks; TIMR
    weighted by tasks. ``label`` becomes its harness id (e.g. ``router:rank1``)."""
    per_task = {t: o for p in parts for t, o in p.per_task.items()}
    n = len(per_task) or 1
    return EvalSummary(harness_id=label, checkpoint_id=parts[0].checkpoint_id if parts else "", split="test",
                       evaluation_id="+".join(p.evaluation_id for p in parts),
                       score=sum(o.mean_reward for o in per_task.values()) / n,
                       pass_at_k=sum(any(o.passed) for o in per_task.values()) / n,
                       avg_at_k=sum(o.pass_rate for o in per_task.values()) / n,
                       timr=sum(p.timr * len(p.per_task) for p in parts) / n,
                       trivial_baseline=next((p.trivial_baseline for p in parts), None), per_task=per_task)


async def routed_test(state: HarnessSState, runtime: Runtime[MetaContext]) -> dict:
    """The final test (Harness-S Table 5): the start pair (H0, W0), the final checkpoint under H0
    (``final``), and under Rank-r routing for r = 1..``harness_s.ranks`` (``rank1``, ...): each
    test task runs under the r-th harness of the router's ranking of the whole pool, H0 included
    (Eq. 12), with the profiles of the last re-anchoring (val evidence only; the router sees the
    test task's prompt, never its outcome). Under a rollout cap also the final pair (H0, W[T]) on val
    (``val_at_budget``); a run the cap ended before the pool was ever profiled has no router, so it
    tests H0 only (said in the log), and one it ended mid-training routes with the profiles of the
    last re-anchoring it paid for, taken at an earlier checkpoint."""
    ctx = runtime.context
    measured = await val_at_budget(state, ctx)
    if not ctx.config.env.n_test:
        return {"test": {}, **measured}
    h0, checkpoint = state["start_harness"], state["checkpoint"]
    tasks = ctx.tasks("test")
    start, final = (EvalSummary.of(await ctx.evaluate(h0, state["start_checkpoint"], "test")),
                    EvalSummary.of(await ctx.evaluate(h0, checkpoint, "test")))
    test = {"start": start, "final": final}
    ctx.log("test", f"start {start.score:.3f} -> final under H0 {final.score:.3f} "
                    f"(trivial {plain(start.trivial_baseline)})")
    if h0 not in state.get("profiles", {}):
        why = state.get("budget_stop") or "no profile node ran"
        ctx.log("test", f"no Rank-r routing: the run ended before the pool was profiled ({why})")
        return {"test": test, **measured}
    router = make_router(ctx, state)
    rankings = await asyncio.gather(*(router.rank(t, include_h0=True, purpose="rank") for t in tasks))
    for r in range(1, ctx.config.harness_s.ranks + 1):
        chosen: dict[str, list[Task]] = {}
        for task, ranking in zip(tasks, rankings):
            if len(ranking) >= r:
                chosen.setdefault(ranking[r - 1], []).append(task)
        if not chosen:
            break
        parts = [EvalSummary.of(await ctx.evaluate(h, checkpoint, "test", ts)) for h, ts in chosen.items()]
        test[f"rank{r}"] = merge_summaries(parts, f"router:rank{r}")
        h0_share = len(chosen.get(h0, [])) / len(tasks)
        ctx.log("test", f"rank-{r} routing {test[f'rank{r}'].score:.3f} over {len(chosen)} harness(es), "
                         f"H0 chosen for {h0_share:.0%} of tasks")
    return {"test": test, **measured}
