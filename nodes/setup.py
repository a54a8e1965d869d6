"""``setup``: store H0 and the starting checkpoint, fix the run's tasks, start round 0."""

from __future__ import annotations

from langgraph.runtime import Runtime

from coevo.nodes.context import MetaContext
from coevo.nodes.state import MetaState


def setup(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Record the run's starting pair (H0, W0) and tasks in the archive.

    Reads ``run_id``, ``incumbent`` (H0 id, already archived by the caller) and ``checkpoint``
    from the input; returns round 0 and the start ids. Idempotent (re-running stores nothing new).
    """
    ctx = runtime.context
    for split in ("train", "val", "test"):
        if getattr(ctx.config.env, f"n_{split}"):
            ctx.archive.add_tasks(ctx.tasks(split))
    ctx.reporter.log(f"setup: run {state['run_id']} H0={state['incumbent'][:12]} W0={state['checkpoint']} "
                     f"env={ctx.env.name} train/val/test={ctx.config.env.n_train}/{ctx.config.env.n_val}/{ctx.config.env.n_test}")
    return {"round": 0, "start_harness": state["incumbent"], "start_checkpoint": state["checkpoint"], "history": []}
