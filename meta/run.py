"""Running a meta-loop strategy durably: the checkpointed graph of a run, started or resumed.

``run_meta`` compiles the strategy's graph with a LangGraph SQLite checkpointer on the run's
database (the archive lives in the same file), so ``run_meta(..., resume=True)`` continues a
crashed or interrupted run from its last completed node. Evaluations are resumable by id, so
finished rollouts are never redone and archive rows never duplicated.
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from coevo.config import RunConfig
from coevo.graphs.registry import get_strategy
from coevo.meta.context import MetaContext
from coevo.meta.services import make_context
from coevo.meta.state import STATE_MODELS
from coevo.report.progress import Reporter
from coevo.storage import Archive
from coevo.storage.tables import RunRecord


def _graph(strategy: str, conn: aiosqlite.Connection) -> Any:
    """The strategy's graph compiled with a SQLite checkpointer on ``conn``."""
    # the serialiser revives exactly the state's pydantic models (LangGraph warns on, and will block, others)
    saver = AsyncSqliteSaver(conn, serde=JsonPlusSerializer(allowed_msgpack_modules=STATE_MODELS))
    return get_strategy(strategy).build().compile(checkpointer=saver, name=strategy)


def new_run_id(config: RunConfig) -> str:
    """A fresh run id ``<strategy>-<8 hex>``."""
    return f"{config.strategy}-{uuid.uuid4().hex[:8]}"


async def run_meta(config: RunConfig, run_id: str | None = None, resume: bool = False, approve: bool = False,
                   reporter: Reporter | None = None, context: MetaContext | None = None, answer: str | None = None,
                   archive: Archive | None = None) -> dict[str, Any]:
    """Run (or resume) one strategy to the end, or to a pending gate approval.

    Args: ``run_id`` (required with ``resume``); ``approve`` pauses before each gate decision;
    ``answer`` resumes a paused gate with ``"yes"``/``"no"``; ``context`` replaces the default
    services (tests; its ``run_id`` is set to this run's). Returns the final state (domain objects
    as the ``coevo.meta.state`` models); with a pending approval, ``state["__interrupt__"]``
    holds the question. Raises ``ValueError`` when resuming an unknown run.
    """
    Path(config.db).parent.mkdir(parents=True, exist_ok=True)
    archive = archive or Archive(config.db)
    if resume:
        run = archive.get_run(run_id or "")
        if run is None:
            raise ValueError(f"no run {run_id!r} in {config.db}; `coevo archive list` shows the runs")
        config = RunConfig.model_validate(run.config) if context is None else config
    run_id = run_id or new_run_id(config)
    if context is not None:
        ctx = dataclasses.replace(context, run_id=run_id)
    else:
        ctx = make_context(config, archive, run_id, reporter, approve)
    if not resume:
        archive.add_run(RunRecord(id=run_id, strategy=config.strategy, config=config.model_dump(mode="json")))
    async with aiosqlite.connect(config.db) as conn:
        graph = _graph(config.strategy, conn)
        thread = {"configurable": {"thread_id": run_id}, "recursion_limit": 1000}
        if answer is not None:
            payload: Any = Command(resume=answer)
        elif resume:
            payload = None
        else:
            payload = {"run_id": run_id}
        # durability="sync": a checkpoint is on disk before the next node runs, so a crash loses at most
        # the running node and checkpointer writes never overlap the archive's (one SQLite file).
        state = await graph.ainvoke(payload, thread, context=ctx, durability="sync")
    done = "__interrupt__" not in state
    run = archive.get_run(run_id)
    archive.add_run(run.model_copy(update={"status": "done" if done else "paused"}))
    return {**state, "run_id": run_id}


async def read_state(db: str, run_id: str, strategy: str) -> dict[str, Any]:
    """The last checkpointed state of run ``run_id`` of ``strategy`` in the SQLite file ``db``, read with
    LangGraph's public ``aget_state`` (nothing runs): the same dict ``run_meta`` returned when the run
    ended (empty but for ``run_id`` when the run never checkpointed). Raises ``ValueError`` for an
    unknown strategy."""
    async with aiosqlite.connect(db) as conn:
        snapshot = await _graph(strategy, conn).aget_state({"configurable": {"thread_id": run_id}})
    return {**snapshot.values, "run_id": run_id}
