"""Archive migrations (Alembic, ``coevo.storage.migrate``) on SQLite and PostgreSQL: an archive written by
the release before Alembic opens after an upgrade, migrations build exactly the declared tables, a newer
archive is refused, a table without a migration still works, and ``coevo archive migrate``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import JSON, Boolean, Column, MetaData, String, Table, inspect, text
from sqlmodel import SQLModel
from test_archive import chained_trajectory
from typer.testing import CliRunner

from coevo.cli.app import app
from coevo.records import (
    Checkpoint,
    EditRecord,
    EvaluationRecord,
    GateDecision,
    HarnessRecord,
    LLMCallRecord,
    Profile,
    RunRecord,
    Task,
    Trajectory,
)
from coevo.storage import SCHEMA_VERSION, Archive, SchemaVersionError
from coevo.storage.connection import make_engine
from coevo.storage.migrate import BASELINE, _config, head

# Written by main's coevo (schema version 2, commit b3755c2) with every kind of row: `sqlite3 .dump`.
RELEASE_V2 = Path(__file__).parent / "data" / "archive_schema_v2.sql"
H0 = "60e7371a07869038448ea5c787800714156ca69fb203ce66b7a12b2c540f7bd9"


def release_v2_archive(db_url: str, tmp_path: Path) -> str:
    """``db_url`` holding the fixture archive as the previous release left it: the SQLite dump as is; on
    another backend the baseline schema (migration 0001, what that release created), the same rows and
    no Alembic bookkeeping."""
    source = tmp_path / "release.db"
    with sqlite3.connect(source) as conn:
        conn.executescript(RELEASE_V2.read_text())
    if "://" not in db_url:
        return str(source)
    engine = make_engine(db_url)
    with engine.begin() as conn:
        command.upgrade(_config(conn), BASELINE)
        conn.execute(text("DROP TABLE alembic_version"))
        old = MetaData()
        old.reflect(conn)
        with sqlite3.connect(source) as lite:
            lite.row_factory = sqlite3.Row
            for name, table in old.tables.items():
                rows = [dict(r) for r in lite.execute(f"SELECT * FROM {name}")]
                for row, c in ((row, c) for row in rows for c in table.columns):  # as PostgreSQL's types want
                    if isinstance(c.type, Boolean):
                        row[c.name] = bool(row[c.name])
                    elif isinstance(c.type, JSON):
                        row[c.name] = json.loads(row[c.name])
                if rows:
                    conn.execute(table.insert(), rows)
    engine.dispose()
    return db_url


def test_an_archive_written_by_the_release_before_alembic_opens_after_upgrade(db_url, tmp_path):
    target = release_v2_archive(db_url, tmp_path)
    with Archive(target) as archive:
        assert archive.revision == head() and archive.schema_version == SCHEMA_VERSION == 3
        run = archive.get(RunRecord, "vace-0001")
        assert run.config == {"rounds": 2, "db": "x.db"} and run.status == "done"
        assert run.created_at.timestamp() == 1764547200.25 and run.updated_at.timestamp() == 1764547260.5
        assert archive.get(HarnessRecord, H0).spec["name"] == "h0"
        (h0,) = archive.run_harnesses("vace-0001")  # migration 0008 linked the run to the harness row it owns
        assert (h0.id, h0.origin, h0.parents, h0.run_id) == (H0, "base", [], "vace-0001")
        assert h0.created_at == archive.get(HarnessRecord, H0).created_at
        (edit,) = archive.list(EditRecord, run_id="vace-0001")
        assert edit.patch == [{"op": "replace", "path": "/name", "value": "h1"}]
        assert archive.get(Checkpoint, "ck1").metrics == {"loss": 0.5}
        assert archive.get(Task, "q1").metadata == {"family": "add"}
        assert archive.get(EvaluationRecord, "ev1").aggregates == {"pass_at_k": 1.0}
        assert archive.list(Trajectory, evaluation_id="ev1") == [chained_trajectory("t1")]
        assert archive.list(GateDecision, run_id="vace-0001")[0].accepted is True
        # its profile JSON held no Profile field (the release wrote none; Harness-S's came later): defaults
        assert archive.list(Profile, harness_id=H0) == [Profile(id="p1", run_id="vace-0001", harness_id=H0,
                                                                checkpoint_id="", created_at=1764547205.0)]
        assert archive.list(LLMCallRecord, role="editor")[0].cost_usd == 0.001
        archive.add_trajectories([chained_trajectory("t2")], evaluation_id="ev1")
    with Archive(target) as again:  # already at head: opening changes nothing
        assert again.revision == head() and again.count(Trajectory, evaluation_id="ev1") == 2


def test_migrations_from_an_empty_database_build_exactly_the_declared_tables(db_url):
    """Fails when a table or column in storage/tables.py has no migration: add one (storage/README.md)."""
    engine = make_engine(db_url if "://" in db_url else f"sqlite:///{db_url}")
    with engine.begin() as conn:
        command.upgrade(_config(conn), "head")
        assert compare_metadata(MigrationContext.configure(conn), SQLModel.metadata) == []
    engine.dispose()


def test_a_new_database_is_created_from_the_tables_and_stamped_at_head(db_url):
    with Archive(db_url) as archive:
        assert archive.revision == head()
        names = set(inspect(archive.engine).get_table_names())
    assert set(SQLModel.metadata.tables) <= names and "alembic_version" in names


def test_an_archive_at_an_unknown_migration_is_refused_with_the_fix(db_url):
    Archive(db_url).close()
    engine = make_engine(db_url if "://" in db_url else f"sqlite:///{db_url}")
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
    engine.dispose()
    with pytest.raises(SchemaVersionError, match="newer coevo.*migration f00d.*upgrade coevo"):
        Archive(db_url)


def test_a_table_without_a_migration_is_still_created_on_new_and_old_archives(db_url, tmp_path):
    (tmp_path / "old").mkdir()
    old = release_v2_archive(db_url, tmp_path / "old")
    extra = Table("coevo_test_extra", SQLModel.metadata, Column("id", String, primary_key=True))
    try:
        for target in (old, str(tmp_path / "new.db")):
            with Archive(target) as archive:
                assert "coevo_test_extra" in inspect(archive.engine).get_table_names()
    finally:
        SQLModel.metadata.remove(extra)


def test_coevo_archive_migrate_reports_what_it_changed(tmp_path):
    target = release_v2_archive(str(tmp_path / "unused.db"), tmp_path)
    def migrate(db: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, ["archive", "migrate", "--db", db])
        return result.exit_code, " ".join(result.output.split())  # rich wraps long lines

    assert migrate(target) == (0, f"archive {target}: schema version 2 (before Alembic) -> migration {head()}")
    assert migrate(target) == (0, f"archive {target} is up to date (migration {head()})")
    code, output = migrate(str(tmp_path / "none.db"))
    assert code == 1 and "no archive at" in output


def test_a_new_migration_guards_each_new_table_and_keeps_other_steps():
    from coevo.storage.migrate import _guard_new_tables

    generated = ("def upgrade() -> None:\n    op.create_table('foo',\n"
                 "    sa.Column('id', sa.String(), nullable=False),\n    sa.PrimaryKeyConstraint('id')\n    )\n"
                 "    op.create_index(op.f('ix_foo_run_id'), 'foo', ['run_id'])\n"
                 "    op.add_column('runs', sa.Column('x', sa.Integer()))\n\n\ndef downgrade() -> None:\n"
                 "    op.drop_table('foo')\n")
    assert _guard_new_tables(generated) == (
        "def upgrade() -> None:\n    if not has_table('foo'):\n        op.create_table('foo',\n"
        "        sa.Column('id', sa.String(), nullable=False),\n        sa.PrimaryKeyConstraint('id')\n        )\n"
        "        op.create_index(op.f('ix_foo_run_id'), 'foo', ['run_id'])\n"
        "    op.add_column('runs', sa.Column('x', sa.Integer()))\n\n\ndef downgrade() -> None:\n"
        "    op.drop_table('foo')\n")
