"""Meta-Harness search as meta-loop nodes (WHALE §3.2; Lee et al., 2026)::

    A_0      = {H}                                   # search_start: the incumbent under the phase's weights
    for i in iterations:
        C_i  = proposer(A_{i-1}, M)                  # propose: any archived harness may be the parent
        A_i  = A_{i-1} + eval(C_i, D_search, 1 roll)  # search_evaluate
        H    = argmax_{A_i} score                    # accept: best of the whole archive

The search split is the run's train tasks (less those a demonstration answers, DESIGN.md
Principles), one rollout per task with the run's seed, so every archived harness is scored on the
same tasks and seeds. Ties go to fewer model calls, then to the older harness. Only training signals
are read: no node here touches val or test.
"""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from coevo.evaluation.results import EvalResult
from coevo.meta.context import MetaContext, services
from coevo.meta.state import Candidate, MetaState, Phase, SearchEntry
from coevo.models.trajectory import Trajectory
from coevo.nodes.edit import realise, record_edit
from coevo.nodes.phases import close_phase, iteration_record
from coevo.nodes.train import stage_tasks
from coevo.roles.proposer import SearchView, ranked
from coevo.timestamps import utcnow
from coevo.training.schedule import Patience


def entry_of(result: EvalResult, order: int, iteration: int, cand: Candidate | None = None) -> SearchEntry:
    """The archive entry of a harness's search-split evaluation (``cand``: the edit that made it)."""
    return SearchEntry(harness_id=result.harness_id, parent_id=cand.parent_id if cand else None, iteration=iteration,
                       order=order, score=result.mean_reward, model_calls=result.model_turns,
                       evaluation_id=result.evaluation_id, per_task=result.per_task,
                       patch=cand.patch if cand else [], rationale=cand.rationale if cand else "")


def rescored(entries: list[SearchEntry], excluded: set[str]) -> list[SearchEntry]:
    """``entries`` with ``score`` the mean reward over their tasks not in ``excluded`` (train tasks a
    demonstration now answers: their score would measure copying); all scored on the same tasks."""
    out = []
    for e in entries:
        kept = [o.mean_reward for t, o in e.per_task.items() if t not in excluded]
        out.append(e.model_copy(update={"score": sum(kept) / len(kept) if kept else 0.0}))
    return out


def best_of_archive(entries: list[SearchEntry], excluded: set[str] = frozenset()) -> SearchEntry:  # type: ignore[assignment]
    """The accepted harness of WHALE §3.2: the highest train score of the whole archive (ties: fewer
    model calls, then older). Raises ``ValueError`` on an empty archive."""
    if not entries:
        raise ValueError("the search archive is empty; search_start seeds it with the incumbent")
    return ranked(rescored(entries, set(excluded)))[0]


def _trajectories(ctx: MetaContext, entries: list[SearchEntry], harness_id: str) -> list[Trajectory]:
    entry = next(e for e in entries if e.harness_id == harness_id)
    return [t for o in entry.per_task.values() for i in o.trajectory_ids for t in ctx.archive.list(Trajectory, id=i)]


async def search_start(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Start a harness-search phase: the archive A_0 = {incumbent}, evaluated under the current
    checkpoint on the search split (train, one rollout per task). Advances ``phase``."""
    ctx = services(runtime)
    started = utcnow()
    result = await ctx.evaluate(state["incumbent"], state["checkpoint"], "train", stage_tasks(ctx, state), k=1)
    phase = state.get("phase", -1) + 1
    ctx.reporter.log(f"search phase {phase}: seed {state['incumbent'][:12]} train score {result.mean_reward:.3f}")
    kind = state.get("phase_kind") if state.get("phase_kind") in ("prompt", "control") else "harness"
    return {"search": [entry_of(result, 0, 0)], "iteration": 0, "phase": phase, "phase_done": False,
            "phase_kind": kind, "phase_started": started}


def propose(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Iteration i: the proposer reads the archive (specs, scores, per-task outcomes, train
    trajectories) and proposes ``whale.candidates`` patches of archived harnesses; each is applied
    and checked inside the phase's ``fields`` (``realise``). Duplicates of archived harnesses are
    rejected. Returns the candidates in ``checked`` and the advanced ``iteration``."""
    ctx = services(runtime)
    if ctx.proposer is None:
        raise ValueError("this strategy searches harnesses but the run has no proposer; build its context with "
                         "coevo.meta.services.make_context")
    it, rnd, fields = state.get("iteration", 0) + 1, state.get("round", 0), state.get("fields")
    entries = state["search"]
    view = SearchView(entries=entries, spec=ctx.spec, trajectories=lambda h: _trajectories(ctx, entries, h),
                      tasks={t.id: t for t in ctx.tasks("train")}, allowed=fields)
    known = {e.harness_id for e in entries}
    out = []
    for proposal in ctx.proposer.propose(view, ctx.config.whale.candidates, it):
        cand = realise(proposal, ctx, rnd, allowed=fields)
        if cand.status != "rejected":
            if cand.spec_id in known:
                cand.status, cand.reason = "rejected", "the child is already in the search archive"
            else:
                cand.status = "checked"
                known.add(cand.spec_id or "")
        record_edit(ctx, cand, rnd)
        ctx.reporter.log(f"propose {it}: {cand.id} {cand.status} {cand.reason[:120] or cand.rationale[:120]}")
        out.append(cand)
    return {"checked": out, "iteration": it, "demo_tasks": [t for c in out if c.spec_id for t in c.demo_tasks]}


async def search_evaluate(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Evaluate each checked candidate on the search split (the seed's tasks and seeds, one rollout
    per task) under the phase's checkpoint and add it to the archive."""
    ctx = services(runtime)
    entries = list(state["search"])
    cands = [c for c in state.get("checked", []) if c.status == "checked" and c.spec_id]
    tasks = ctx.tasks("train", ids=list(entries[0].per_task))
    results = await asyncio.gather(*(ctx.evaluate(c.spec_id or "", state["checkpoint"], "train", tasks, k=1)
                                     for c in cands))
    for cand, result in zip(cands, results):
        entries.append(entry_of(result, len(entries), state.get("iteration", 0), cand))
    return {"search": entries}


def search_stop(state: MetaState, runtime: Runtime[MetaContext], signal: list[float]) -> str:
    """Why the harness phase ends after this iteration ("" to go on): its fixed length
    (``plan.search_iterations``), or adaptively (WHALE §4) the patience rule on the best train
    score so far (``signal``: the seed's, then one per iteration), at least ``whale.min_iterations``
    and at most ``whale.max_iterations``."""
    plan, cfg, it = state["plan"], services(runtime).config.whale, state.get("iteration", 0)
    if not plan.adaptive:
        return f"fixed length: {plan.search_iterations} iterations" if it >= plan.search_iterations else ""
    rule = Patience(minimum=cfg.min_iterations + 1, patience=cfg.search_patience, unit="iterations")
    if reason := rule.stop(signal):
        return reason
    return f"reached whale.max_iterations = {cfg.max_iterations}" if it >= cfg.max_iterations else ""


def accept(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """After iteration i the best harness of the whole archive is accepted as the incumbent (it may
    be older than this iteration). Records the iteration and, when the phase ends, the ``Phase``."""
    ctx = services(runtime)
    excluded = set(state.get("demo_tasks", []))
    entries, phase, it = state["search"], state.get("phase", 0), state.get("iteration", 0)
    best = best_of_archive(entries, excluded)
    record = iteration_record(state, best.harness_id, best.score, best.harness_id != state["incumbent"])
    seed = rescored(entries[:1], excluded)[0].score
    signal = [seed] + [s.score for s in state.get("search_iterations", []) if s.phase == phase] + [best.score]
    reason = search_stop(state, runtime, signal)
    ctx.reporter.log(f"accept {it}: {best.harness_id[:12]} (iteration {best.iteration}) train score {best.score:.3f}"
                     + (f"; phase ends: {reason}" if reason else ""))
    out: dict = {"incumbent": best.harness_id, "search_iterations": [record], "phase_done": bool(reason)}
    if reason:
        record = Phase(index=phase, cycle=state.get("round", 0), kind="harness", length=it, unit="iterations", steps=it,
                       harness_id=best.harness_id, checkpoint=state["checkpoint"], signal=signal, stop_reason=reason,
                       fields=state.get("fields"))
        out["phases"] = [close_phase(ctx, record, state.get("phase_started"))]
    return out


def more_search(state: MetaState) -> str:
    """``"continue"`` while the running phase has not ended, else ``"done"``."""
    return "done" if state.get("phase_done") else "continue"
