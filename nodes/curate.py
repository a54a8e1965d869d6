"""``curate``: failures of the round's train trajectories → repair directions (Harness-S §3.2)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from coevo.meta.context import MetaContext, services
from coevo.meta.state import RESET, MetaState
from coevo.nodes.train import incumbent_spec


def curate(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Group the failed train trajectories T[t] by root cause; each direction needs ≥ 2 failed
    tasks (Table 8). Only train trajectories are read, so val/test answers never reach the curator.
    Clears the round's candidates."""
    ctx = services(runtime)
    trajectories = [t for i in state.get("train_trajectories", []) for t in ctx.archive.trajectories(id=i)]
    train = [t for t in trajectories if t.split == "train"]
    tasks = {t.id: t for t in ctx.tasks("train")}
    directions = ctx.curator.curate(train, incumbent_spec(state, ctx), tasks)
    failed = len({t.task_id for t in train if not t.passed})
    ctx.reporter.log(f"curate round {state.get('round', 0)}: {failed} failed train tasks -> {len(directions)} direction(s) "
                     + ", ".join(f"{d.cause}({len(d.task_ids)})" for d in directions))
    return {"directions": [d.model_dump() for d in directions], "candidates": RESET}
