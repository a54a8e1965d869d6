"""``edit``: one JSON-Patch candidate per repair direction (fanned out with LangGraph ``Send``)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from langgraph.runtime import Runtime
from langgraph.types import Send

from coevo.harnesses.errors import HarnessError
from coevo.harnesses.patch import apply_edit
from coevo.meta.context import MetaContext
from coevo.meta.sealing import Sealed, live, unseal
from coevo.meta.state import Candidate, EditRequest, MetaState
from coevo.records import Trajectory
from coevo.roles.editor import Proposal
from coevo.roles.operators import assignments


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
