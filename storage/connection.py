"""How the archive reaches its database: the URL of a target and an engine configured per backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic_core
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool


def database_url(target: str | Path) -> str:
    """The SQLAlchemy URL of ``target``: a URL as is, ``":memory:"``, or a SQLite file path (its
    parent directories are created)."""
    target_text = str(target)
    if "://" in target_text:
        return target_text
    if target_text == ":memory:":
        return "sqlite://"
    path = Path(target_text).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def make_engine(url: str) -> Engine:
    """A SQLAlchemy engine for ``url`` with pydantic-aware JSON columns; on SQLite: WAL, a 30 s busy
    timeout, and one shared connection for in-memory databases."""
    kwargs: dict[str, Any] = {
        "json_serializer": lambda obj: pydantic_core.to_json(obj).decode(),
        "json_deserializer": json.loads,
    }
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        if url in ("sqlite://", "sqlite:///:memory:"):
            kwargs["poolclass"] = StaticPool
    engine = create_engine(url, **kwargs)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

    return engine
