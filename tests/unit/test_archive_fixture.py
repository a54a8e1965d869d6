"""An archive written by main at d0f3406 (before the archive stored the domain models, issue 21) opens with
this code on SQLite and on PostgreSQL, is migrated on open (0002 -> head), and reads back every table's
rows as the domain models, with the values that code wrote.

The fixtures (``tests/data/archive_d0f3406*``, written by ``tests/data/make_archive_d0f3406.py`` run
against d0f3406): the SQLite archive as ``sqlite3 .dump``, the PostgreSQL archive as ``pg_dump``, and
for each the rows as that code's ``Archive`` read them back. What migration 0003 changed on purpose
is undone before comparing (``as_written``): a checkpoint's ``model_ref``/``vllm`` were keys of its
``config``, a profile was one ``profile`` JSON, a promotion's pairs one ``pairs`` JSON, a ballot had
no ``kind``, a model call no ``seed``; timestamps stored as floats read back as the same instant (to the microsecond).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import MetaData, select, text

from coevo.records import Ballot, Checkpoint, HarnessRecord, Promotion, RunHarness, Trajectory
from coevo.storage import Archive
from coevo.storage.connection import make_engine
from coevo.storage.migrate import _config, head
from coevo.storage.tables import TABLES

DATA = Path(__file__).resolve().parents[1] / "data"
LATER = {"run_heartbeats": "0004", "experience": "0005", "decompositions": "0006", "exports": "0007",
         "run_harnesses": "0008"}
"""Tables added after d0f3406, with the migration that adds them: not in the fixture; empty once it is migrated,
but for ``run_harnesses``, which 0008 fills with a link per harness row a run owns."""
KINDS: dict[str, type] = {stored.table.name: kind for kind, stored in TABLES.items() if stored.table.name not in LATER}
"""Every kind d0f3406 stored (every kind the archive stores but ``LATER``), by its table's name."""
TIMES = ("created_at", "updated_at", "started_at", "ended_at")


def restore(db_url: str, tmp_path: Path) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """The fixture archive on ``db_url``'s backend (the SQLite dump into a file, or the PostgreSQL dump
    replayed into ``db_url``) and the rows d0f3406 read back from it."""
    if "://" not in db_url:
        target = tmp_path / "d0f3406.db"
        with sqlite3.connect(target) as conn:
            conn.executescript((DATA / "archive_d0f3406.sql").read_text())
        conn.close()
        return str(target), json.loads((DATA / "archive_d0f3406.json").read_text())
    import psycopg

    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True) as conn:
        conn.execute((DATA / "archive_d0f3406.pg.sql").read_text().encode())  # several statements, no parameters
    return db_url, json.loads((DATA / "archive_d0f3406.pg.json").read_text())


def revision(target: str) -> str:
    engine = make_engine(target if "://" in target else f"sqlite:///{target}")
    with engine.connect() as conn:
        found = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    engine.dispose()
    return found


def as_written(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """A row read by this code (``model_dump(mode="json")``) in the shape d0f3406's record had."""
    row = dict(row)
    if table == "policy_checkpoints":
        serving = {"model_ref": row.pop("model_ref"), "vllm": row.pop("vllm")}
        row["config"] = {**row["config"], **{k: v for k, v in serving.items() if v}}
    elif table == "profiles":
        own = ("id", "run_id", "round", "created_at")
        row = {**{k: row[k] for k in (*own, "harness_id", "checkpoint_id")},
               "profile": {k: v for k, v in row.items() if k not in own}}
    elif table == "promotions":
        row["pairs"] = {k: row.pop(k) for k in ("incumbent", "best", "adapted")}
    elif table == "votes":
        row.pop("kind")
    elif table == "trajectories":
        # each model call's sampling seed is recorded since issue 29 item 6: absent (None) in d0f3406's rows
        calls = [{k: v for k, v in call.items() if not (k == "seed" and v is None)} for call in row["calls"]]
        row = {**row, "calls": calls}
        row = {"id": row["id"], "digest": hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()}
    return row


def instant(value: Any) -> Any:
    """A timestamp as Unix microseconds (d0f3406 wrote some as floats, some as ISO strings)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value).timestamp()
    return None if value is None else round(value * 1e6)


def same(read: dict[str, Any], written: dict[str, Any]) -> bool:
    """Equal rows, timestamps to the microsecond (a float of Unix seconds rounds to it once)."""
    if read.keys() != written.keys():
        return False
    for key, value in written.items():
        if key in TIMES:
            a, b = instant(read[key]), instant(value)
            if (a is None) != (b is None) or (a is not None and abs(a - b) > 1):
                return False
        elif read[key] != value:
            return False
    return True


def test_the_fixture_covers_every_kind_the_archive_stores():
    for name in ("archive_d0f3406.json", "archive_d0f3406.pg.json"):
        written = json.loads((DATA / name).read_text())
        assert set(written) == set(KINDS) and all(written.values()), name  # every table has rows
    assert set(KINDS) | set(LATER) == {stored.table.name for stored in TABLES.values()}


def test_an_archive_written_by_d0f3406_opens_migrated_and_reads_back_what_it_wrote(db_url, tmp_path):
    target, written = restore(db_url, tmp_path)
    assert revision(target) == "0002"
    with Archive(target) as archive:
        assert archive.revision == head() == max(LATER.values())
        assert all(archive.count(kind) == 0 for kind, stored in TABLES.items()
                   if stored.table.name in LATER and kind is not RunHarness)
        owned = sorted((h.run_id, h.id, h.origin, h.parents) for h in archive.list(HarnessRecord) if h.run_id)
        links = sorted((h.run_id, h.harness_id, h.origin, h.parents) for h in archive.list(RunHarness))
        assert owned and links == owned
        for table, kind in KINDS.items():
            read = {r.id: as_written(table, r.model_dump(mode="json")) for r in archive.list(kind)}
            expected = {r["id"]: r for r in written[table]}
            assert read.keys() == expected.keys(), table
            wrong = [i for i in expected if not same(read[i], expected[i])]
            assert not wrong, (table, wrong[:3], read[wrong[0]], expected[wrong[0]])
        served = archive.get(Checkpoint, "served-1")
        assert served.vllm == ["http://127.0.0.1:8001", "http://127.0.0.1:8002"] and served.config == {"lr": 1e-4}
        assert served.model_ref == "litellm:hosted_vllm/coevo-served-1"
        base = next(c for c in archive.list(Checkpoint) if c.id.startswith("base-"))
        assert base.model_ref == "fake:words" and base.vllm == [] and base.config == {}
        promotion = archive.list(Promotion, run_id="rsi-1")[0]
        assert (promotion.promoted.harness_id, promotion.promoted.checkpoint_id) == (promotion.harness_id,
                                                                                     promotion.checkpoint_id)
        assert all(b.kind is None for b in archive.list(Ballot))  # not recorded then
        archive.put(Ballot(id="new", run_id="hs-1", task_id="w-fig", voter="rule"))
    with Archive(target) as again:  # at head: opening changes nothing; new rows sit beside the old
        assert again.revision == head() and again.get(Ballot, "new").kind == "rule"
        assert again.count(Trajectory) == len(written["trajectories"])


CHANGED = ("policy_checkpoints", "profiles", "promotions", "votes")
"""The tables migration 0003 reshapes."""


def raw_rows(target: str) -> dict[str, list[dict[str, Any]]]:
    """The rows of ``CHANGED`` as stored (reflected columns), by table, sorted by id."""
    engine = make_engine(target if "://" in target else f"sqlite:///{target}")
    with engine.connect() as conn:
        found = MetaData()
        found.reflect(conn, only=CHANGED)
        rows = {name: [dict(r) for r in conn.execute(select(found.tables[name]).order_by(text("id"))).mappings()]
                for name in CHANGED}
    engine.dispose()
    return rows


def test_migration_0003_downgrades_to_the_rows_d0f3406_stored(db_url, tmp_path):
    target, _ = restore(db_url, tmp_path)
    before = raw_rows(target)
    Archive(target).close()
    engine = make_engine(target if "://" in target else f"sqlite:///{target}")
    with engine.begin() as conn:
        command.downgrade(_config(conn), "0002")
    engine.dispose()
    assert revision(target) == "0002" and raw_rows(target) == before


@pytest.mark.parametrize("table", CHANGED)
def test_the_fixture_holds_the_shapes_migration_0003_changes(table):
    """The old shapes are really in the fixture (else the comparison above would prove nothing for them)."""
    written = json.loads((DATA / "archive_d0f3406.json").read_text())[table]
    key = {"policy_checkpoints": "config", "profiles": "profile", "promotions": "pairs", "votes": "ranking"}[table]
    assert all(key in row for row in written)
    if table == "policy_checkpoints":
        assert any("vllm" in row["config"] and "model_ref" in row["config"] for row in written)
    if table == "profiles":
        assert any(row["profile"].get("per_task") for row in written)
    if table == "promotions":
        assert any(row["pairs"].get("best") for row in written)
