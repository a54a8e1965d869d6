"""The durable-run checkpointer's connections: PostgreSQL connections that a server or firewall drops while
a run waits on a long model call are replaced, not used (the archive's engine pings, the checkpointer's
pool checks on checkout); a SQLite URL checkpoints into its file."""

from __future__ import annotations

import asyncio
import operator
import time
from typing import Annotated, TypedDict

import psycopg
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph

from coevo.app.checkpointer import SETUP_LOCK, is_postgres, libpq_url, open_checkpointer
from coevo.records import RunRecord
from coevo.storage import Archive


class Counter(TypedDict):
    steps: Annotated[list[int], operator.add]


def drop_connections(url: str) -> int:
    """Terminate every other session on ``url``'s database (what an idle timeout does); how many."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        return len(conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                                "current_database() AND pid <> pg_backend_pid()").fetchall())


def test_urls_name_their_backend():
    assert is_postgres("postgresql+psycopg://u@h:5/db") and is_postgres("postgresql://u@h/db")
    assert not is_postgres("/runs/coevo.db") and not is_postgres("sqlite:///x.db")
    assert libpq_url("postgresql+psycopg://u:p@h:5/db?sslmode=disable") == "postgresql://u:p@h:5/db?sslmode=disable"


async def test_a_sqlite_url_checkpoints_into_that_file(tmp_path):
    graph = StateGraph(Counter)
    graph.add_node("step", lambda state: {"steps": [len(state["steps"])]})
    graph.add_edge(START, "step")
    async with open_checkpointer(f"sqlite:///{tmp_path / 'run.db'}", JsonPlusSerializer()) as saver:
        await graph.compile(checkpointer=saver).ainvoke({"steps": []}, {"configurable": {"thread_id": "r1"}})
    async with open_checkpointer(str(tmp_path / "run.db"), JsonPlusSerializer()) as saver:  # the same file
        saved = await saver.aget_tuple({"configurable": {"thread_id": "r1"}})
    assert saved.checkpoint["channel_values"]["steps"] == [0]


async def test_a_run_continues_after_its_connections_are_dropped(postgres_url):
    archive = Archive(postgres_url)
    archive.put(RunRecord(id="r1"))
    graph = StateGraph(Counter)
    graph.add_node("step", lambda state: {"steps": [len(state["steps"])]})
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    config = {"configurable": {"thread_id": "r1"}}
    async with open_checkpointer(postgres_url, JsonPlusSerializer()) as saver:
        compiled = graph.compile(checkpointer=saver)
        await compiled.ainvoke({"steps": []}, config)
        assert drop_connections(postgres_url) >= 2  # the pool's and the archive's
        state = await compiled.ainvoke({"steps": []}, config)  # the checkpointer's pool lends a fresh one
    assert state["steps"] == [0, 1]
    archive.update_run("r1", status="done")  # the archive's engine pings, then reconnects
    assert archive.get(RunRecord, "r1").status == "done"
    archive.close()


async def test_a_run_waiting_for_the_checkpoint_setup_never_blocks_the_setup_it_waits_for(postgres_url):
    """Another run holds the setup lock and builds LangGraph's indexes CONCURRENTLY (which waits for every older
    transaction) while this run waits for the lock: its wait must not be a transaction the index build waits
    for, or each waits for the other for good (PostgreSQL sees no deadlock: the lock and the build are on two
    connections). Before ``setup_lock`` polled, the build below hit its 10 s statement timeout."""
    url = libpq_url(postgres_url)
    with psycopg.connect(url, autocommit=True) as holder, psycopg.connect(url, autocommit=True) as build:
        holder.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK,))  # the other run's setup holds the lock
        build.execute("CREATE TABLE other_setup (id int)")

        async def this_run() -> None:
            async with open_checkpointer(postgres_url, JsonPlusSerializer()):
                pass

        waiting = asyncio.create_task(this_run())
        await asyncio.sleep(1.0)
        assert not waiting.done()  # it waits for the lock
        build.execute("SET statement_timeout = '10s'")
        started = time.monotonic()
        await asyncio.to_thread(build.execute, "CREATE INDEX CONCURRENTLY other_setup_idx ON other_setup (id)")
        assert time.monotonic() - started < 5  # the other run's index build did not wait for this run
        holder.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
        await asyncio.wait_for(waiting, 60)  # then this run takes the lock and sets up its tables
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoint_migrations").fetchone()[0] > 0
