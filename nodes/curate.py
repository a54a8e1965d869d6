"""``curate``: failures of the round's train trajectories → repair directions (Harness-S §3.2)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from coevo.meta.context import MetaContext
from coevo.meta.state import RESET, MetaState
from coevo.records import Trajectory


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
