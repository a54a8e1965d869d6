"""How the archive reaches its database: the URL of a target and an engine configured per backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic_core
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool


def is_url(target: str | Path) -> bool:
    """Whether the archive target ``target`` (``--db``) is a database URL (a server, e.g.
    ``postgresql+psycopg://...``) rather than a SQLite file path or ``":memory:"``."""
    return "://" in str(target)


def location(target: str | Path) -> str:
    """Where ``target`` is, independent of the working directory: a URL or ``":memory:"`` as is, a
    file path made absolute."""
    text = str(target)
    return text if is_url(text) or text == ":memory:" else str(Path(text).expanduser().resolve())


def exists(target: str | Path) -> bool:
    """Whether ``target`` names a database that is already there: a URL (a server's), ``":memory:"``,
    or a SQLite file that exists."""
    text = str(target)
    return is_url(text) or text == ":memory:" or Path(text).expanduser().is_file()


def database_url(target: str | Path) -> str:
    """The SQLAlchemy URL of ``target``: a URL as is, ``":memory:"``, or a SQLite file path (its
    parent directories are created)."""
    target_text = str(target)
    if is_url(target_text):
        return target_text
    if target_text == ":memory:":
        return "sqlite://"
    path = Path(target_text).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def make_engine(url: str) -> Engine:
    """A SQLAlchemy engine for ``url`` with pydantic-aware JSON columns; on SQLite: WAL, a 30 s busy
    timeout, transactions begun by SQLAlchemy (``writing`` ones ``IMMEDIATE``; DDL is transactional
    too), and one shared connection for in-memory databases; on PostgreSQL: a pool whose connections
    are checked before use (``pool_pre_ping``) and recycled after 30 minutes, so a connection left idle
    through a long model call is replaced rather than failing."""
    kwargs: dict[str, Any] = {
        "json_serializer": lambda obj: pydantic_core.to_json(obj).decode(),
        "json_deserializer": json.loads,
    }
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        if url in ("sqlite://", "sqlite:///:memory:"):
            kwargs["poolclass"] = StaticPool
    else:
        kwargs.update(pool_pre_ping=True, pool_recycle=1800)
    engine = create_engine(url, **kwargs)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # SQLAlchemy's BEGIN below, not the driver's implicit one
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            # a writer takes the lock when its transaction starts (waiting up to the busy timeout), so
            # a read never has to be upgraded to a write under another writer ("database is locked")
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")

    return engine


_WRITE = "coevo_write"


def writing(engine: Engine) -> Engine:
    """``engine`` for transactions that write: on SQLite they begin ``IMMEDIATE`` (the write lock is
    taken, or waited for, at ``BEGIN``); on other backends it is ``engine`` with an inert option."""
    return engine.execution_options(**{_WRITE: True})
