"""CoEvo-RSI Harness Inheritance (docs/papers.md, §Harness Inheritance; Figure 3, left and
centre): ``survey`` reads the archive A<t into an ``ArchiveSummary`` and probes every archived
harness under the current checkpoint on the same few train tasks; ``curate_archive`` assembles
the round's briefs from the archive's train evidence (this round's train rollouts plus every past
train rollout with an interface violation: the past mismatches); ``fan_out_with_archive`` sends
one ``edit_from_base`` branch per brief, whose editor picks a base harness by index from A<t (any
archived harness) and edits it. The chosen base and the evidence are stored with the edit
(``MetaContext.record_base_choice``); the child's parent is the chosen base.
"""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime
from langgraph.types import Send

from coevo.graphs.coevo_rsi.archive_view import harness_aliases, summarize
from coevo.graphs.coevo_rsi.state import BaseRequest, CoevoRsiState
from coevo.meta.context import MetaContext
from coevo.meta.inheritance import PairStats
from coevo.meta.sealing import sealed_tasks
from coevo.meta.state import RESET
from coevo.nodes.refine import realise, sealing
from coevo.records import Trajectory
from coevo.roles.inheritor import with_cause_evidence
from coevo.roles.operators import assignments


async def _survey(state: CoevoRsiState, runtime: Runtime[MetaContext], latest_only: bool) -> dict:
    ctx = runtime.context
    summary = summarize(ctx.archive, ctx.run_id, state["incumbent"], state["checkpoint"],
                        state.get("start_checkpoint", state["checkpoint"]), latest_only=latest_only)
    excluded = sealed_tasks(state)
    probe = [t for t in ctx.tasks("train") if t.id not in excluded][: ctx.config.meta.smoke_tasks]
    if probe and len(summary.entries) > 1:
        results = await asyncio.gather(*(ctx.evaluate(e.harness_id, summary.checkpoint, "train", probe, k=1)
                                         for e in summary.entries))
        summary.entries = [e.model_copy(update={"probe": PairStats(
            harness_id=e.harness_id, checkpoint_id=summary.checkpoint, split="train", score=r.mean_reward,
            timr=r.timr, rollouts=r.n_rollouts, turns=r.model_turns)}) for e, r in zip(summary.entries, results)]
    summary = with_cause_evidence(summary, ctx.archive.list(Trajectory, run_id=ctx.run_id, split="train"), ctx.spec,
                                  {t.id: t for t in ctx.tasks("train")}, harness_aliases(ctx.archive, ctx.run_id))
    ctx.log("survey", f"round {state.get('round', 0)}: {len(summary.entries)} harness(es), "
                     f"{len(summary.checkpoints)} checkpoint(s) ({len(summary.adapters)} adapters) in A<t"
                     + (f", probed on {len(probe)} train task(s)" if summary.entries[0].probe else "")
                     + (" [latest only]" if latest_only else ""))
    return {"archive_view": summary}


async def survey(state: CoevoRsiState, runtime: Runtime[MetaContext]) -> dict:
    """A<t: every archived harness and checkpoint of the run with their train outcomes, each harness
    probed under the current checkpoint on the same ``meta.smoke_tasks`` train tasks and seeds
    (those no demonstration answers; one rollout each: TIMR as the cheap compatibility signal,
    CoEvo-RSI §3.1) so the bases compare, and each harness's per-cause evidence from its train
    rollouts (``with_cause_evidence``) (``archive_view``)."""
    return await _survey(state, runtime, latest_only=False)


async def survey_latest(state: CoevoRsiState, runtime: Runtime[MetaContext]) -> dict:
    """A<t restricted to the incumbent harness and the current checkpoint (CoEvo-RSI's Latest-only ablation)."""
    return await _survey(state, runtime, latest_only=True)


def curate_archive(state: CoevoRsiState, runtime: Runtime[MetaContext]) -> dict:
    """The round's briefs: the curator groups the failures among this round's train rollouts and the
    archive's past train rollouts with an interface violation (of the harnesses in ``archive_view``;
    train split only, so val/test answers never reach it) into directions. Clears the round's
    candidates."""
    ctx = runtime.context
    summary = state["archive_view"]
    current = ctx.archive.get_many(Trajectory, state.get("train_trajectories", []))
    alias, kept = harness_aliases(ctx.archive, ctx.run_id), {e.harness_id for e in summary.entries}
    past = [t for t in ctx.archive.list(Trajectory, run_id=ctx.run_id, split="train")
            if t.violation_turns and alias.get(t.harness_id, t.harness_id) in kept
            and t.checkpoint_id in summary.checkpoints]
    evidence = list({t.id: t for t in current + past if t.split == "train"}.values())
    curation = ctx.curator.curate(evidence, ctx.spec(state["incumbent"]), {t.id: t for t in ctx.tasks("train")})
    ctx.store_calls(curation.calls)
    ctx.log("curate", f"round {state.get('round', 0)}: {len(current)} rollouts this round + {len(past)} past "
                     f"mismatches -> {len(curation.directions)} brief(s) "
                     + ", ".join(f"{d.cause}({len(d.task_ids)})" for d in curation.directions)
                     + (f" [{curation.reason[:120]}]" if curation.reason else ""))
    return {"directions": curation.directions, "candidates": RESET}


def fan_out_with_archive(state: CoevoRsiState, runtime: Runtime[MetaContext]) -> list[Send] | str:
    """``meta.samples`` ``edit`` branches for each of the ``meta.candidates`` best-supported briefs
    (``coevo.roles.operators.assignments``), each with the archive summary; straight to ``check``
    without briefs."""
    meta = runtime.context.config.meta
    branches = assignments(state.get("directions", [])[: meta.candidates], meta.samples)
    if not branches:
        return "check"
    return [Send("edit", BaseRequest(direction=d, incumbent=state["incumbent"], round=state.get("round", 0),
                                      train_trajectories=state.get("train_trajectories", []), sample=s,
                                      summary=state["archive_view"])) for d, s in branches]


def edit_from_base(request: BaseRequest, runtime: Runtime[MetaContext]) -> dict:
    """Editor k of the round: the inheritor picks base index ``i_{t,k}`` from A<t, the editor edits
    that base for the brief (successful train rollouts as demonstration sources), and the base
    choice is stored with its evidence (``MetaContext.record_base_choice``: the brief and the
    summary rows)."""
    ctx = runtime.context
    direction, summary, rnd = request["direction"], request["summary"], request["round"]
    inheritance = ctx.inheritor.choose_base(direction, summary)
    ctx.store_calls(inheritance.calls)
    choice = inheritance.choice
    trajectories = ctx.archive.get_many(Trajectory, request["train_trajectories"])
    solved = [t for t in trajectories if t.passed and t.split == "train"]
    proposal = ctx.editor.propose(direction, ctx.spec(choice.base_id), {t.id: t for t in ctx.tasks("train")}, solved,
                                  round=rnd, sample=request.get("sample", 0))
    candidate = realise(proposal, ctx, rnd)
    ctx.record_base_choice(rnd, choice, direction, request["incumbent"], candidate, summary)
    older = " (not the incumbent)" if choice.base_id != request["incumbent"] else ""
    ctx.log("edit", f"{direction.id}: base #{choice.index} {choice.base_id[:12]}{older} -> {candidate.status} "
                     f"{candidate.spec_id and candidate.spec_id[:12] or ''} "
                     f"{candidate.reason[:100] or candidate.rationale[:100]}")
    return {"candidates": [candidate], "sealed": sealing([candidate], {})}
