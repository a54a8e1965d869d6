"""The durable-run checkpointer for an archive URL: LangGraph's SQLite saver on a SQLite file, its
Postgres saver (``langgraph-checkpoint-postgres``, extra ``coevo[postgres]``) on a PostgreSQL URL.

The checkpointer shares the archive's database: on SQLite one file (WAL; both sides wait up to 30 s
for the write lock, so neither locks the other out), on PostgreSQL one database (its ``checkpoints``
tables beside the archive's ``policy_checkpoints``). The Postgres saver draws connections from a
small pool that checks each connection before lending it and sends TCP keepalives, and that closes
connections idle for ``MAX_IDLE_S`` and replaces any older than ``MAX_LIFETIME_S``: a connection a
server or firewall dropped during a long model call is replaced, not used.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from sqlalchemy.engine import make_url

from coevo.errors import MissingExtraError

BUSY_TIMEOUT_S = 30.0
"""How long a SQLite writer waits for the other (archive or checkpointer) to release the lock."""
MAX_IDLE_S = 600.0
"""A pooled PostgreSQL connection idle this long is closed (the pool opens another when needed)."""
MAX_LIFETIME_S = 3600.0
"""A pooled PostgreSQL connection is replaced after this long, however busy."""
SETUP_LOCK = 0x636B7074
"""The PostgreSQL advisory lock ("ckpt") that serialises concurrent first-time setups of the checkpoint tables."""
SETUP_POLL_S = 0.05
"""How often a run asks again for the setup lock another run holds (``setup_lock``)."""


def is_postgres(db: str) -> bool:
    """Whether the archive target ``db`` is a PostgreSQL URL."""
    return db.split("://", 1)[0].split("+", 1)[0] in ("postgresql", "postgres")


def libpq_url(db: str) -> str:
    """The SQLAlchemy URL ``db`` (``postgresql+psycopg://...``) as a libpq connection URL."""
    return make_url(db).set(drivername="postgresql").render_as_string(hide_password=False)


@asynccontextmanager
async def open_checkpointer(db: str, serde: Any) -> AsyncIterator[Any]:
    """A LangGraph async checkpointer on the archive ``db`` (a SQLite path or URL, or a PostgreSQL URL) with
    ``serde``, its tables created. Raises ``MissingExtraError`` when ``db`` is PostgreSQL and
    ``coevo[postgres]`` is not installed."""
    if not is_postgres(db):
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        path = (make_url(db).database or ":memory:") if "://" in db else db  # sqlite:///x.db -> x.db
        async with aiosqlite.connect(path, timeout=BUSY_TIMEOUT_S) as conn:
            yield AsyncSqliteSaver(conn, serde=serde)
        return
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError as err:
        raise MissingExtraError(f"durable runs on PostgreSQL need the postgres extra ({err.name} is missing): "
                                "pip install 'coevo[postgres]'") from None
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row,
              "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 5}
    async with AsyncConnectionPool(libpq_url(db), min_size=1, max_size=4, kwargs=kwargs, open=False,
                                   check=AsyncConnectionPool.check_connection, max_idle=MAX_IDLE_S,
                                   max_lifetime=MAX_LIFETIME_S) as pool:
        saver = AsyncPostgresSaver(pool, serde=serde)  # type: ignore[arg-type]
        async with pool.connection() as conn:
            await setup_lock(conn)
            try:
                await saver.setup()
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
        yield saver


async def setup_lock(conn: Any) -> None:
    """Take the session advisory lock ``SETUP_LOCK`` on ``conn`` (a psycopg ``AsyncConnection``, autocommit,
    dict rows) by asking every ``SETUP_POLL_S`` seconds (``pg_try_advisory_lock``), never by waiting inside the
    server: LangGraph's setup creates its indexes ``CONCURRENTLY``, and a concurrent index build waits for
    every transaction older than it, a backend blocked in ``pg_advisory_lock`` included. A run waiting there
    for the lock would wait for the run holding it, whose index build waits for the waiting run: a deadlock
    PostgreSQL cannot see (the lock and the index build are on two connections of one process), which can hang
    two ``coevo run``s starting at once on a new PostgreSQL archive for good. Between two asks this backend is
    idle, so the holder's index build never waits for it."""
    while not (await (await conn.execute("SELECT pg_try_advisory_lock(%s) AS got", (SETUP_LOCK,))).fetchone())["got"]:
        await asyncio.sleep(SETUP_POLL_S)
