"""``edit``: one JSON-Patch candidate per repair direction (fanned out with LangGraph ``Send``)."""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import Send

from coevo.harnesses.errors import HarnessError
from coevo.harnesses.patch import apply_patch
from coevo.harnesses.spec import load_harness
from coevo.meta.context import MetaContext, services
from coevo.meta.state import Candidate, Direction, MetaState
from coevo.storage.tables import EditRecord


def fan_out(state: MetaState, runtime: Runtime[MetaContext]) -> list[Send] | str:
    """One ``edit`` branch per direction, the ``config.meta.candidates`` best-supported ones;
    straight to ``check`` when there is none."""
    directions = state.get("directions", [])[: services(runtime).config.meta.candidates]
    if not directions:
        return "check"
    return [Send("edit", {"direction": d, "incumbent": state["incumbent"], "round": state.get("round", 0),
                          "run_id": state["run_id"], "train_trajectories": state.get("train_trajectories", [])})
            for d in directions]


def record_edit(ctx: MetaContext, candidate: Candidate, run_id: str, round: int) -> None:
    """Store (or update, by id) the edit record of ``candidate`` with its current status."""
    ctx.archive.add_edits([EditRecord(id=f"{run_id}-r{round}-{candidate.id}-v{candidate.revision}", run_id=run_id, round=round,
                                      parent_id=candidate.parent_id, child_id=candidate.spec_id, patch=candidate.patch,
                                      rationale=candidate.rationale, direction=candidate.direction,
                                      status=candidate.status, reason=candidate.reason)])


def realise(candidate: Candidate, ctx: MetaContext, run_id: str, round: int) -> Candidate:
    """Apply the candidate's patch to its parent; store the child harness and the edit record.

    A patch that does not apply or yields an invalid spec rejects the candidate with every
    problem as its reason (never raises for a malformed edit).
    """
    if candidate.status != "rejected":
        parent = load_harness(ctx.archive.get_harness(candidate.parent_id).spec)
        try:
            child = apply_patch(parent, candidate.patch, tools=None)
            candidate.spec_id = ctx.archive.add_harness(child, [parent.id], "edit", run_id)
        except HarnessError as err:
            candidate.status, candidate.reason = "rejected", str(err)
    record_edit(ctx, candidate, run_id, round)
    return candidate


def edit(payload: dict, runtime: Runtime[MetaContext]) -> dict:
    """Ask the editor for a patch of the incumbent that repairs ``payload["direction"]``.

    Successful train trajectories of the round are offered as demonstration sources.
    """
    ctx = services(runtime)
    direction = Direction(**payload["direction"])
    spec = load_harness(ctx.archive.get_harness(payload["incumbent"]).spec)
    solved = [t for i in payload["train_trajectories"] for t in ctx.archive.trajectories(id=i) if t.passed and t.split == "train"]
    tasks = {t.id: t for t in ctx.tasks("train")}
    candidate = realise(ctx.editor.propose(direction, spec, tasks, solved), ctx, payload["run_id"], payload["round"])
    ctx.reporter.log(f"edit   {direction.id}: {candidate.status} {candidate.spec_id and candidate.spec_id[:12] or ''} "
                     f"{candidate.reason[:120] or candidate.rationale[:120]}")
    return {"candidates": [candidate.model_dump()]}
