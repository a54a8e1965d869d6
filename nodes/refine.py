"""H'[t] = refine(H[t], T[t]): the refinement phase of VACE's Algorithm 1 (Harness-S §3.2, Table 8),
node by node, and its wiring::

    directions = curate(T[t])                   # failures of the round's train trajectories -> root causes
    for d in directions:                        # one branch per direction (LangGraph ``Send``: fan_out)
        H'[t] = edit(H[t], d)                   # a JSON-Patch candidate, applied and stored (realise)
    check(H'[t])                                # static and local checks, at most one revision

``curate`` groups the failed train trajectories by root cause; ``edit`` asks the editor for one
JSON-Patch candidate per repair direction; ``check`` runs the static checks (the child spec
validated when its patch applied, its rendered prompt fits its context budget on at least the train
tasks its parent's fits, ``coevo.harnesses.fit``; its interface-mismatch rate, TIMR, CoEvo-RSI, on a
small train smoke run does not exceed the incumbent's by more than ``meta.max_timr_increase``) and
the optional local check (on ≤ 30 train tasks — the direction's failed tasks plus ≤ 10 previously
solved controls — the candidate must beat the incumbent's mean reward). A spec that is valid but works
against its use (a fixed decoding seed: ``harness_warnings``) passes with a warning in
``cand.checks.warnings`` and the log. Neither check scores a task whose answer went into a
demonstration (the candidate's own or an earlier candidate's): its score would measure copying, not
repair. A candidate identical to one the gate already rejected under the same checkpoint fails at
once: the same val tasks and seeds would give the same verdict (the evaluation is even reused by
id). A candidate that fails gets one revision from the editor, checked again. Only train
trajectories are read, so val/test answers never reach the curator or the editor.

The module ends with the sub-wiring a strategy calls by name (``add_refinement``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from coevo.evaluation.results import EvalResult
from coevo.harnesses.errors import HarnessError
from coevo.harnesses.fit import TokenMeter, meter_of, prompt_fit
from coevo.harnesses.patch import apply_edit
from coevo.harnesses.spec import harness_warnings
from coevo.meta.context import MetaContext
from coevo.meta.sealing import Sealed, live, sealed_tasks, unseal
from coevo.meta.state import RESET, Candidate, Direction, EditRequest, MetaState
from coevo.records import Trajectory
from coevo.roles.editor import Proposal
from coevo.roles.operators import assignments


def curate(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Group the failed train trajectories T[t] by root cause; each direction needs ≥ 2 failed
    tasks (Table 8). Only train trajectories are read, so val/test answers never reach the curator.
    Stores the curator's LLM calls; clears the round's candidates."""
    ctx = runtime.context
    trajectories = [t for i in state.get("train_trajectories", []) for t in ctx.archive.list(Trajectory, id=i)]
    train = [t for t in trajectories if t.split == "train"]
    curation = ctx.curator.curate(train, ctx.spec(state["incumbent"]), {t.id: t for t in ctx.tasks("train")})
    ctx.store_calls(curation.calls)
    failed = len({t.task_id for t in train if not t.passed})
    ctx.log("curate", f"round {state.get('round', 0)}: {failed} failed train tasks -> {len(curation.directions)} "
                     "direction(s) " + ", ".join(f"{d.cause}({len(d.task_ids)})" for d in curation.directions)
                     + (f" [{curation.reason[:120]}]" if curation.reason else ""))
    return {"directions": curation.directions, "candidates": RESET}


def fan_out(state: MetaState, runtime: Runtime[MetaContext]) -> list[Send] | str:
    """One ``edit`` branch per candidate: ``meta.samples`` of each of the ``meta.candidates``
    best-supported directions (``coevo.roles.operators.assignments``); straight to ``check`` when
    there is none."""
    meta = runtime.context.config.meta
    branches = assignments(state.get("directions", [])[: meta.candidates], meta.samples)
    if not branches:
        return "check"
    return [Send("edit", EditRequest(direction=d, incumbent=state["incumbent"], round=state.get("round", 0),
                                     train_trajectories=state.get("train_trajectories", []), sample=s))
            for d, s in branches]


def realise(proposal: Proposal, ctx: MetaContext, round: int, allowed: Sequence[str] | None = None) -> Candidate:
    """Store the editor's LLM calls; apply the candidate's patch to its parent; store the child
    harness and the edit record.

    A patch that does not apply, yields an invalid spec, leaves the harness unchanged (a no-op,
    ``coevo.harnesses.patch.NOOP``) or (with ``allowed``, the JSON Pointer prefixes a phase may edit:
    FST, PACE) changes a field outside them rejects the candidate with every problem as its reason
    (``apply_edit``; never raises for a malformed edit). The candidate's ``demo_tasks``
    become what the role declared plus every train task whose gold answer the child carries
    (``MetaContext.demonstrated``: any role, any length, any formatting).
    """
    ctx.store_calls(proposal.calls)
    candidate = proposal.candidate
    if candidate.status != "rejected":
        parent = ctx.spec(candidate.parent_id)
        try:
            child = apply_edit(parent, candidate.patch, tools=None, allowed=allowed)
            candidate.spec_id = ctx.archive.add_harness(child, [parent.id], "edit", ctx.run_id)
        except HarnessError as err:
            candidate.status, candidate.reason = "rejected", str(err)
        else:
            candidate.demo_tasks = list(dict.fromkeys([*candidate.demo_tasks, *ctx.demonstrated(child)]))
    ctx.record_edit(candidate, round)
    return candidate


def sealing(candidates: Sequence[Candidate], state: Mapping[str, Any]) -> dict[str, Sealed | None]:
    """The ``sealed`` update for ``candidates`` (``coevo.meta.sealing``): a live candidate's child
    with the train tasks it answers; a rejected one's removed (its tasks return to the train set)
    unless the run accepted that spec before (``unseal``)."""
    pending = {c.spec_id: live(c.demo_tasks) for c in candidates if c.spec_id and c.status != "rejected"}
    return {**unseal([c.spec_id or "" for c in candidates if c.status == "rejected"], state), **pending}


def edit(request: EditRequest, runtime: Runtime[MetaContext]) -> dict:
    """Ask the editor for candidate ``request["sample"]`` of a patch of the incumbent that repairs
    ``request["direction"]`` in the round.

    Successful train trajectories of the round are offered as demonstration sources. The child is
    pending: ``sealed`` gets it with the train tasks it answers (``sealing``).
    """
    ctx = runtime.context
    direction = request["direction"]
    trajectories = [t for i in request["train_trajectories"] for t in ctx.archive.list(Trajectory, id=i)]
    solved = [t for t in trajectories if t.passed and t.split == "train"]
    tasks = {t.id: t for t in ctx.tasks("train")}
    proposal = ctx.editor.propose(direction, ctx.spec(request["incumbent"]), tasks, solved, round=request["round"],
                                  sample=request.get("sample", 0))
    candidate = realise(proposal, ctx, request["round"])
    ctx.log("edit", f"{direction.id}: {candidate.status} {candidate.spec_id and candidate.spec_id[:12] or ''} "
                     f"{candidate.reason[:120] or candidate.rationale[:120]}")
    return {"candidates": [candidate], "sealed": sealing([candidate], {})}


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


def add_refinement(builder: StateGraph, after: str, then: str | None = None, checked: bool = True) -> str:
    """H'[t] = refine(H[t], T[t]) after node ``after``: ``curate`` (directions) -> one ``edit`` per
    direction (``Send``) -> ``check`` (Harness-S Table 8), then to ``then`` when given. Returns the
    last node, ``"check"``. ``checked=False`` (VACE's ungated ablation: no check gate) leaves
    ``check`` out: the edits, or ``curate`` when there is no direction, go straight to ``then``."""
    builder.add_node("curate", curate)
    builder.add_node("edit", edit)
    builder.add_edge(after, "curate")
    if not checked:
        if then is None:
            raise ValueError("add_refinement(checked=False) needs then=: the node after the edits")
        builder.add_conditional_edges("curate", fan_out, {"edit": "edit", "check": then})
        builder.add_edge("edit", then)
        return "edit"
    builder.add_node("check", check)
    builder.add_conditional_edges("curate", fan_out, ["edit", "check"])
    builder.add_edge("edit", "check")
    if then is not None:
        builder.add_edge("check", then)
    return "check"
