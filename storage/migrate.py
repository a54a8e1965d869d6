"""The archive's schema, kept current by Alembic (``coevo/storage/migrations``; ``storage/README.md`` says
how to add a migration).

``prepare`` runs whenever an ``Archive`` opens, in one transaction that holds the database's
schema lock (SQLite ``BEGIN IMMEDIATE``, a PostgreSQL advisory lock), so processes opening one
archive at once never race:

- a new database gets every table from ``SQLModel.metadata`` (``create_all``) and is stamped at
  the head revision: a table that has no migration yet still works in new runs;
- a database written before Alembic (a ``schema_version`` table, no ``alembic_version``) gets the
  version-1 -> 2 step, is stamped at the baseline revision ``0001`` (schema version 2), then upgraded;
- an Alembic database behind head is upgraded (``coevo archive migrate`` does the same explicitly);
- a database at a revision this coevo does not know, or with a ``schema_version`` above
  ``SCHEMA_VERSION``, raises ``SchemaVersionError`` (written by a newer coevo).

Afterwards ``create_all`` adds any table still missing, and ``schema_version`` is set to
``SCHEMA_VERSION`` (3: "managed by Alembic"), so the release before Alembic refuses the database
with its own "upgrade coevo" message instead of misreading it.
"""

from __future__ import annotations

import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, select, text
from sqlmodel import SQLModel

from coevo.storage.errors import SchemaVersionError
from coevo.storage.tables import SCHEMA_VERSION, SchemaVersionRow

MIGRATIONS = Path(__file__).parent / "migrations"
BASELINE = "0001"
"""The revision of schema version 2, the last schema before Alembic."""

LEGACY_STEPS: dict[int, tuple[tuple[str, str, str], ...]] = {
    1: (("trajectories", "violation_turns",
         "ALTER TABLE trajectories ADD COLUMN violation_turns INTEGER NOT NULL DEFAULT 0"),),
}
"""Pre-Alembic schema version -> its (table, added column, SQL) steps to the next version (was ``UPGRADES``)."""

_LOCK_KEY = 0x636F65766F  # "coevo": the PostgreSQL advisory lock that serialises schema changes


def _config(conn: Connection | None = None) -> Config:
    """Alembic's config for the shipped migrations, running on ``conn`` (see ``migrations/env.py``)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    return config


def head() -> str:
    """The newest migration revision this coevo ships."""
    return str(_scripts().get_current_head())


@functools.cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


def new_revision(message: str) -> Path:
    """Write a new migration into ``coevo/storage/migrations/versions`` from what ``coevo.storage.tables``
    declares beyond the head (Alembic autogenerate against an in-memory SQLite database at head), with
    the next four-digit revision id. Review it before committing (``storage/README.md``). Returns its path."""
    from sqlalchemy import create_engine

    with create_engine("sqlite://").begin() as conn:
        config = _config(conn)
        command.upgrade(config, "head")
        script = command.revision(config, message=message, autogenerate=True, rev_id=f"{int(head()) + 1:04d}")
    path = Path(script.path)  # type: ignore[union-attr]
    path.write_text(_guard_new_tables(path.read_text()))
    return path


def _guard_new_tables(source: str) -> str:
    """``source`` with each ``op.create_table`` block of ``upgrade`` (and the ``op.create_index`` lines
    right after it) under ``if not has_table(...)``: ``create_all`` already made the table in databases
    opened before this migration existed."""
    out: list[str] = []
    inside = False
    for line in source.split("\n"):
        if line.startswith("def downgrade"):
            inside = False
        starts = line.startswith("    op.create_table(")
        if starts:
            out.append(f"    if not has_table({line.split('(', 1)[1].split(',', 1)[0]}):")
            inside = True
        elif inside and not (line.startswith("    op.create_index(") or line.startswith(("    sa.", "    )"))):
            inside = False
        out.append("    " + line if inside else line)
    return "\n".join(out)


def current(conn: Connection) -> str | None:
    """The database's Alembic revision (None before Alembic or when empty)."""
    return MigrationContext.configure(conn).get_current_revision()


def _lock(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})


def _legacy_version(conn: Connection, tables: set[str]) -> int | None:
    if "schema_version" not in tables:
        return None
    found = conn.execute(select(SchemaVersionRow.__table__.c.version)).scalar()  # type: ignore[attr-defined]
    return None if found is None else int(found)


def _adopt_legacy(conn: Connection, version: int, tables: set[str]) -> None:
    """Take a pre-Alembic archive from ``version`` to schema version 2 (adding only what is missing)."""
    for step in range(version, 2):
        for table, column, statement in LEGACY_STEPS.get(step, ()):
            if table in tables and column not in {c["name"] for c in inspect(conn).get_columns(table)}:
                conn.execute(text(statement))


def prepare(conn: Connection, url: str, upgrade: bool = True) -> tuple[str | None, str | None]:
    """Bring the database on ``conn`` (inside a transaction) to the head revision (see the module
    docstring); returns (revision found, revision now). With ``upgrade=False`` nothing is changed on
    an existing database (the revision now is the one found). Raises ``SchemaVersionError``."""
    _lock(conn)
    scripts = _scripts()
    tables = set(inspect(conn).get_table_names())
    legacy = _legacy_version(conn, tables)
    found = current(conn)
    newer = f"archive {url} was written by a newer coevo"
    fix = "upgrade coevo (pip install -U coevo) or pass another --db"
    if legacy is not None and legacy > SCHEMA_VERSION:
        raise SchemaVersionError(f"archive {url} has schema version {legacy}, but this coevo reads version "
                                 f"{SCHEMA_VERSION} at most: {fix}")
    if found is not None and found not in {s.revision for s in scripts.walk_revisions()}:
        raise SchemaVersionError(f"{newer} (migration {found}, this coevo knows up to {scripts.get_current_head()}): "
                                 f"{fix}")
    ours = set(SQLModel.metadata.tables)
    if found is None and legacy is None and not ours & tables:  # a new database
        SQLModel.metadata.create_all(conn)
        MigrationContext.configure(conn).stamp(scripts, "head")
    elif upgrade:
        if found is None:  # written before Alembic
            _adopt_legacy(conn, legacy or 1, tables)
            MigrationContext.configure(conn).stamp(scripts, BASELINE)
        command.upgrade(_config(conn), "head")
        SQLModel.metadata.create_all(conn)  # tables no migration creates yet (storage/README.md)
    else:
        return found, found
    if legacy != SCHEMA_VERSION:
        table = SchemaVersionRow.__table__  # type: ignore[attr-defined]
        conn.execute(table.delete())
        conn.execute(table.insert().values(id=1, version=SCHEMA_VERSION))
    return found, current(conn)


def up_to_date(conn: Connection) -> bool:
    """Whether the database needs nothing from ``prepare`` (at head, every table present): checked
    without the schema lock, so opening a current archive never waits for another writer."""
    tables = set(inspect(conn).get_table_names())
    return (set(SQLModel.metadata.tables) <= tables and current(conn) == head()
            and _legacy_version(conn, tables) == SCHEMA_VERSION)

