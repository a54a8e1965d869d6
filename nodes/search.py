"""Meta-Harness search as meta-loop nodes (WHALE §3.2; Lee et al., 2026)::

    A_0      = {H}                                   # search_start: the incumbent under the phase's weights
    for i in iterations:
        C_i  = proposer(A_{i-1}, M)                  # propose: any archived harness may be the parent
        A_i  = A_{i-1} + eval(C_i, D_search, 1 roll)  # search_evaluate
        H    = argmax_{A_i} score                    # accept: best of the whole archive

The search split D_search is ``search.tasks`` train-split tasks after the weight phases' own
(``MetaContext.search_tasks``; WHALE §5 keeps them disjoint), less those a live harness answers
(docs/design.md, Principles), one rollout per task with the run's seed, so every archived harness is
scored on the same tasks and seeds. Ties go to fewer model calls, then to the older harness. Only
training signals are read: no node here touches val or test. Every proposal is pending in
``sealed`` until its phase ends. What ends a phase and what is accepted after an
iteration are the family's (WHALE's ``accept``, PACE's gate and ``pace_step``); ``close_phase`` and
``iteration_record`` are the records they share.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from langgraph.runtime import Runtime

from coevo.envs.base import Task
from coevo.evaluation.results import EvalResult
from coevo.meta.context import MetaContext
from coevo.meta.sealing import sealed_tasks
from coevo.meta.search import SearchEntry, SearchIteration, SearchState
from coevo.meta.state import Candidate
from coevo.models.trajectory import Trajectory
from coevo.nodes.refine import realise, sealing
from coevo.records import Phase
from coevo.roles.proposer import SearchView, ranked
from coevo.timestamps import utcnow


def search_split(ctx: MetaContext, state: SearchState) -> list[Task]:
    """The search split less the tasks a live harness answers (``sealed_tasks``). Raises
    ``ValueError`` when none is left."""
    excluded = sealed_tasks(state)
    tasks = [t for t in ctx.search_tasks() if t.id not in excluded]
    if not tasks:
        raise ValueError("every search-split task is answered by a harness of the run; raise search.tasks")
    return tasks


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
    return ctx.archive.get_many(Trajectory, [i for o in entry.per_task.values() for i in o.trajectory_ids])


def close_phase(ctx: MetaContext, phase: Phase, started: datetime | None) -> Phase:
    """``phase`` with its start (``started``, UTC) and end (now) times, recorded under the run as
    ``<run id>-phase<index>`` so budgets can be attributed per phase."""
    return ctx.record_phase(Phase.model_validate({**phase.model_dump(), "started_at": started, "ended_at": utcnow()}))


def iteration_record(state: SearchState, accepted: str, score: float, changed: bool) -> SearchIteration:
    """The ``SearchIteration`` of the running phase's latest iteration (its candidates from ``checked``)."""
    checked = state.get("checked", [])
    return SearchIteration(phase=state.get("phase", 0), cycle=state.get("round", 0),
                           iteration=state.get("iteration", 0),
                           accepted=accepted, score=score, changed=changed,
                           candidates=[c.spec_id or "" for c in checked if c.status == "checked"],
                           rejected=[f"{c.id}: {c.reason}" for c in checked if c.status == "rejected"])


async def search_start(state: SearchState, runtime: Runtime[MetaContext]) -> dict:
    """Start a harness-search phase: the archive A_0 = {incumbent}, evaluated under the current
    checkpoint on the search split (``search_split``, one rollout per task). Advances ``phase``."""
    ctx = runtime.context
    started = utcnow()
    result = await ctx.evaluate(state["incumbent"], state["checkpoint"], "train", search_split(ctx, state), k=1)
    phase = state.get("phase", -1) + 1
    ctx.log("search", f"phase {phase}: seed {state['incumbent'][:12]} train score {result.mean_reward:.3f}")
    return {"search": [entry_of(result, 0, 0)], "iteration": 0, "phase": phase, "phase_done": False,
            "phase_started": started}


def propose(state: SearchState, runtime: Runtime[MetaContext]) -> dict:
    """Iteration i: the proposer reads the archive (specs, scores, per-task outcomes, train
    trajectories) and proposes ``search.candidates`` patches of archived harnesses; each is applied
    and checked inside the phase's ``fields`` (``realise``). Duplicates of archived harnesses are
    rejected. Returns the candidates in ``checked``, the advanced ``iteration`` and the proposals as
    pending in ``sealed`` (``sealing``)."""
    ctx = runtime.context
    if ctx.proposer is None:
        raise ValueError("this strategy searches harnesses but the run has no proposer; build its context with "
                         "coevo.app.services.make_context")
    it, rnd, fields = state.get("iteration", 0) + 1, state.get("round", 0), state.get("fields")
    entries = state["search"]
    view = SearchView(entries=entries, spec=ctx.spec, trajectories=lambda h: _trajectories(ctx, entries, h),
                      tasks={t.id: t for t in ctx.search_tasks()}, allowed=fields)
    known = {e.harness_id for e in entries}
    out = []
    for proposal in ctx.proposer.propose(view, ctx.config.search.candidates, it):
        cand = realise(proposal, ctx, rnd, allowed=fields)
        if cand.status != "rejected":
            if cand.spec_id in known:
                cand.status, cand.reason = "rejected", "the child is already in the search archive"
            else:
                cand.status = "checked"
                known.add(cand.spec_id or "")
        ctx.record_edit(cand, rnd)
        ctx.log("propose", f"{it}: {cand.id} {cand.status} {cand.reason[:120] or cand.rationale[:120]}")
        out.append(cand)
    return {"checked": out, "iteration": it, "sealed": sealing(out, state)}


async def search_evaluate(state: SearchState, runtime: Runtime[MetaContext]) -> dict:
    """Evaluate each checked candidate on the search split (the seed's tasks and seeds, one rollout
    per task) under the phase's checkpoint and add it to the archive."""
    ctx = runtime.context
    entries = list(state["search"])
    cands = [c for c in state.get("checked", []) if c.status == "checked" and c.spec_id]
    seeded = set(entries[0].per_task)
    tasks = [t for t in ctx.search_tasks() if t.id in seeded]
    results = await asyncio.gather(*(ctx.evaluate(c.spec_id or "", state["checkpoint"], "train", tasks, k=1)
                                     for c in cands))
    for cand, result in zip(cands, results):
        entries.append(entry_of(result, len(entries), state.get("iteration", 0), cand))
    return {"search": entries}


def more_search(state: SearchState) -> str:
    """``"continue"`` while the running phase has not ended, else ``"done"``."""
    return "done" if state.get("phase_done") else "continue"
