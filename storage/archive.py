"""``Archive``: the one class that reads and writes the coevo database (docs/design.md, Storage).

A SQLite file in WAL mode by default (``Archive("runs/coevo.db")``), or any SQLAlchemy URL
(``Archive("postgresql+psycopg://...")``) for shared or large runs. It stores the persisted domain
models themselves (``coevo.records``; each kind's table comes from ``coevo.storage.tables.TABLES``):
``put`` writes any records as idempotent upserts by id in one transaction, so a resumed run
rewrites rather than duplicates rows and a batch (a task's rollouts, a round's edits) is written
all-or-nothing; ``get`` and ``list`` read them back as the same models, never ORM rows; ``run_harnesses`` reads a
run's harnesses through its links (a content-addressed harness row belongs to the first run to store it).

Writes are serialised by a lock, so one ``Archive`` may be shared by threads (the evaluator
persists from a worker thread while rollouts continue on the event loop); several processes may
write one archive at once (SQLite: WAL, writers begin ``IMMEDIATE`` and wait up to 30 s; PostgreSQL:
row-level upserts).

A write the database refuses for lack of space (a full disk, a quota, PostgreSQL's ``disk_full``)
raises ``ArchiveFullError``: nothing of that write is stored, and the run it belongs to can be
resumed once there is space.

A record returned here is a plain value: changing it (a JSON dict in place included) changes nothing
stored until it is ``put`` back whole; ``update_run`` writes only the columns it names. Timestamps
are UTC-aware ``datetime``s on every backend (``coevo.timestamps``), stored as Unix seconds.
"""

from __future__ import annotations

import builtins
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence, TypeVar

from pydantic import BaseModel
from sqlalchemy import Table, delete, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DatabaseError
from sqlmodel import SQLModel

from coevo.masking import redact
from coevo.records import HarnessRecord, RunHarness, RunHeartbeat, RunRecord, Trajectory
from coevo.storage.connection import database_url, make_engine, writing
from coevo.storage.errors import AmbiguousIdError, ArchiveError, ArchiveFullError, disk_full
from coevo.storage.errors import SchemaVersionError as SchemaVersionError  # re-exported
from coevo.storage.migrate import head, prepare, up_to_date
from coevo.storage.tables import TABLES, SchemaVersionRow, Stored
from coevo.timestamps import utcnow

R = TypeVar("R", bound=BaseModel)

_CHUNK = 500
"""Rows per DELETE ... IN (...) statement in the portable upsert (well under SQLite's limit)."""


def stored(kind: type[BaseModel]) -> Stored:
    """The registry entry of ``kind``. Raises ``ArchiveError`` for a model the archive does not store."""
    try:
        return TABLES[kind]
    except KeyError:
        raise ArchiveError(f"{kind.__name__} is not a kind the archive stores: one of "
                           f"{[k.__name__ for k in TABLES]} (declare it in coevo.records and register it in "
                           "coevo.storage.tables)") from None


class _Lost(Exception):
    """``Archive.claim_run``'s condition did not hold: its transaction is rolled back."""


class Archive:
    """The coevo archive: runs, harnesses, edits, checkpoints, tasks, evaluations, trajectories,
    gate decisions, profiles, pool members, ballots, LLM calls, budgets, phases, CoEvo-RSI's
    base choices, model proposals and promotions, and the runs' heartbeats (every kind in
    ``coevo.storage.tables.TABLES``).

    Args: ``target`` a file path (SQLite, WAL; parent directories are created), ``":memory:"``,
    or any SQLAlchemy URL (``postgresql+psycopg://user@host/db``); ``migrate`` (default) brings an
    older database up to date on open (``coevo.storage.migrate.prepare``; ``revision`` is then the
    head), ``False`` opens it as it is. Raises ``SchemaVersionError`` when the database was created
    by a newer schema (upgrade coevo, or point at another database), ``ArchiveFullError`` when its
    tables cannot be created or migrated for lack of space, and ``ArchiveError`` when it cannot be opened.
    """

    def __init__(self, target: str | Path = "coevo.db", migrate: bool = True) -> None:
        self.url = database_url(target)
        self._lock = threading.RLock()
        try:
            self.engine = make_engine(self.url)
            with self.engine.connect() as conn:
                ready = up_to_date(conn)
            with self.engine.connect() if ready else writing(self.engine).begin() as conn:
                self.revision = head() if ready else prepare(conn, self.url, upgrade=migrate)[1]
                version = SchemaVersionRow.__table__.c.version  # type: ignore[attr-defined]
                self.schema_version = conn.execute(select(version)).scalar()
        except DatabaseError as exc:  # OperationalError (cannot open) or "file is not a database"
            if disk_full(exc):  # creating or migrating its tables on a full disk: not a bad path
                raise ArchiveFullError(redact(str(target)), "the archive's tables",
                                       "the same command; nothing was started") from None
            raise ArchiveError(f"cannot open archive {redact(str(target))}: {redact(str(exc.orig))}; check the path "
                               "or URL") from exc
        except ImportError as exc:  # the URL's driver (psycopg for postgresql+psycopg://)
            raise ArchiveError(f"cannot open archive {redact(str(target))}: its driver {exc.name} is not installed: "
                               "pip install 'coevo[postgres]' for PostgreSQL") from None
        self._writer = writing(self.engine)

    @staticmethod
    def _tables() -> builtins.list[Table]:
        """Every archive table, in ``storage/tables.py``'s declaration order: ``SQLModel.metadata``,
        the same set ``create_all`` and the migrations work from (a new table needs no entry here)."""
        return builtins.list(SQLModel.metadata.tables.values())

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------

    def _upsert(self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
        """Replace-by-id in one statement where the dialect has one (SQLite ``INSERT OR REPLACE``,
        PostgreSQL ``ON CONFLICT DO UPDATE``), else delete the ids and insert (portable)."""
        if not rows:
            return
        ids = [row["id"] for row in rows]
        if len(set(ids)) != len(ids):
            raise ArchiveError(f"duplicate ids in one {table.name} batch: ids must be unique per call")
        dialect = conn.dialect.name
        if dialect == "sqlite":
            conn.execute(table.insert().prefix_with("OR REPLACE"), builtins.list(rows))
        elif dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            stmt = pg_insert(table)
            stmt = stmt.on_conflict_do_update(
                index_elements=["id"], set_={c.name: stmt.excluded[c.name] for c in table.columns if c.name != "id"})
            conn.execute(stmt, builtins.list(rows))
        else:
            for start in range(0, len(ids), _CHUNK):
                conn.execute(delete(table).where(table.c.id.in_(ids[start:start + _CHUNK])))
            conn.execute(table.insert(), builtins.list(rows))

    @contextmanager
    def _transaction(self, what: str) -> Iterator[Connection]:
        """One write transaction (all or nothing) under the archive's lock. A write the database
        refuses for lack of space raises ``ArchiveFullError`` naming ``what`` was being written."""
        try:
            with self._lock, self._writer.begin() as conn:
                yield conn
        except (DatabaseError, OSError) as exc:
            if disk_full(exc):
                raise ArchiveFullError(redact(self.url), what) from exc
            raise

    def _write(self, batches: dict[Table, builtins.list[dict[str, Any]]]) -> None:
        what = ", ".join(f"{len(rows)} row(s) of {table.name}" for table, rows in batches.items())
        with self._transaction(what or "nothing") as conn:
            for table, rows in batches.items():
                self._upsert(conn, table, rows)

    def put(self, *records: BaseModel) -> None:
        """Insert or replace ``records`` by id (any registered kinds, mixed), all in one transaction.
        Raises ``ArchiveError`` for a kind the archive does not store or two records of one kind
        with the same id."""
        batches: dict[Table, builtins.list[dict[str, Any]]] = {}
        for record in records:
            entry = stored(type(record))
            batches.setdefault(entry.table, []).append(entry.row(record))
        self._write(batches)

    @staticmethod
    def _insert_new(conn: Connection, table: Table, row: dict[str, Any]) -> bool:
        """Insert ``row`` into ``table`` on ``conn`` unless its id is there; whether it was inserted (SQLite
        ``INSERT OR IGNORE``, PostgreSQL ``ON CONFLICT DO NOTHING``: atomic across processes)."""
        if conn.dialect.name == "sqlite":
            return conn.execute(table.insert().prefix_with("OR IGNORE"), row).rowcount == 1
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            stmt = pg_insert(table).values(**row).on_conflict_do_nothing(index_elements=["id"])
            return conn.execute(stmt.returning(table.c.id)).first() is not None
        if conn.execute(select(table.c.id).where(table.c.id == row["id"])).first() is not None:
            return False
        conn.execute(table.insert(), row)
        return True

    def put_new(self, record: BaseModel) -> bool:
        """Store ``record`` unless a row of its kind with its id exists (budget accounting: what an id
        names was paid for once); returns whether it was stored. Atomic across processes (SQLite
        ``INSERT OR IGNORE`` under the write lock, PostgreSQL ``ON CONFLICT DO NOTHING``)."""
        entry = stored(type(record))
        with self._transaction(f"a row of {entry.table.name}") as conn:
            return self._insert_new(conn, entry.table, entry.row(record))

    def claim_run(self, beat: RunHeartbeat, expected: RunHeartbeat | None, status: tuple[str, str] | RunRecord,
                  on: Sequence[str] = ("host", "pid", "at")) -> bool:
        """A process's claim on a run, all or nothing in one transaction (atomic across processes: of two that
        read the same rows and then claim, one wins): the run's heartbeat ``beat`` replaces ``expected`` only if
        ``expected`` is still the stored one by the fields ``on`` (None: only where the run has none), and
        ``status`` either moves the run's status from its first value to its second only if it is still the first,
        or (a ``RunRecord``, a new run) stores that run only if no run has its id. Returns whether both happened;
        when not, nothing changed (``coevo.app.heartbeat.take`` and its undo)."""
        beats, runs = TABLES[RunHeartbeat], TABLES[RunRecord]
        row = beats.row(beat)
        try:
            with self._transaction(f"run {beat.id}'s claim") as conn:
                if expected is None:
                    swapped = self._insert_new(conn, beats.table, row)
                else:
                    held = [beats.table.c.id == beat.id, *(beats.column(f) == getattr(expected, f) for f in on)]
                    swapped = conn.execute(beats.table.update().where(*held).values(**row)).rowcount == 1
                if swapped and isinstance(status, RunRecord):
                    swapped = self._insert_new(conn, runs.table, runs.row(status))
                elif swapped:
                    moved = runs.table.update().where(runs.table.c.id == beat.id, runs.table.c.status == status[0])
                    swapped = conn.execute(moved.values(status=status[1], updated_at=utcnow())).rowcount == 1
                if not swapped:
                    raise _Lost
        except _Lost:  # rolled back: the other process's rows stay as they were
            return False
        return True

    def add_harness(self, spec: Any, parents: Sequence[str] | None = None, origin: str = "",
                    run_id: str | None = None) -> str:
        """Store a harness spec (a ``HarnessSpec``, as ``HarnessRecord.of``, or a ``HarnessRecord``)
        unless the archive holds its id; returns its id. The id is the content's, so the row is the first
        run's to store it: a later run (or a concurrent one) storing the same spec keeps the stored
        ``run_id``, ``origin`` and ``parents`` instead of taking the row over (atomic across processes),
        except a row no run owns (``coevo eval`` stores its harness without one), which the first run to
        store the spec claims. With ``run_id``, the same transaction links the run to the harness
        (``RunHarness``, once per run and harness, with this call's ``origin`` and ``parents``), so
        ``run_harnesses`` lists it for every run that stored it. Raises ``ArchiveError`` for anything else."""
        try:
            record = spec if isinstance(spec, HarnessRecord) else HarnessRecord.of(
                spec, builtins.list(parents) if parents is not None else None, origin, run_id)
        except TypeError as err:
            raise ArchiveError(f"add_harness: {err}") from None
        table, row = TABLES[HarnessRecord].table, TABLES[HarnessRecord].row(record)
        with self._transaction(f"harness {record.id[:12]}") as conn:
            if not self._insert_new(conn, table, row) and record.run_id is not None:  # one UPDATE: atomic
                conn.execute(table.update().where(table.c.id == record.id, table.c.run_id.is_(None))
                             .values(run_id=row["run_id"], origin=row["origin"], parents=row["parents"]))
            if record.run_id is not None:
                links = TABLES[RunHarness]
                self._insert_new(conn, links.table, links.row(RunHarness.of(record)))
        return record.id

    def add_trajectories(self, trajectories: Sequence[Trajectory], evaluation_id: str | None = None,
                         run_id: str | None = None) -> None:
        """Persist a batch of trajectories in ONE transaction (all or none), upserting by id, linked to
        the evaluation and run that produced them (``list(Trajectory, evaluation_id=...)`` finds them).
        Every ``Trajectory`` field is kept, including each call's token ids and logprobs."""
        entry = TABLES[Trajectory]
        self._write({entry.table: [entry.row(t, evaluation_id, run_id) for t in trajectories]})  # type: ignore[call-arg]

    def update_run(self, id: str, **changes: Any) -> None:
        """Set only the named columns of run ``id`` (e.g. ``status="done"``, ``config={...}``) and its
        ``updated_at`` to now, in one ``UPDATE``: concurrent writers of other columns or rows are never
        overwritten with stale values. Raises ``ArchiveError`` for an unknown run or column."""
        table = TABLES[RunRecord].table
        settable = set(table.c.keys()) - {"id"}
        if set(changes) - settable:
            raise ArchiveError(f"update_run cannot set {sorted(set(changes) - settable)}: one of {sorted(settable)}")
        values = RunRecord.model_validate({"id": id, **changes}).model_dump(include=set(changes))
        with self._transaction(f"run {id}'s {', '.join(changes)}") as conn:
            done = conn.execute(table.update().where(table.c.id == id).values(**values, updated_at=utcnow()))
        if done.rowcount != 1:
            raise ArchiveError(f"no run {id!r} in {redact(self.url)} to update: see `coevo archive list runs`")

    # -- reading ---------------------------------------------------------------------------

    def _query(self, entry: Stored, columns: Any, where: dict[str, Any]) -> Any:
        query = select(*columns)
        for name, value in where.items():
            if value is None:
                continue
            try:
                query = query.where(entry.column(name) == value)
            except KeyError:
                raise ArchiveError(f"{entry.model.__name__} has no field {name!r} to filter on: one of "
                                   f"{entry.columns}") from None
        return query

    def run_harnesses(self, run_id: str) -> builtins.list[HarnessRecord]:
        """The harnesses run ``run_id`` stored or reused (its ``RunHarness`` links, those another run
        stored first included), in the order it first stored them, each as this run saw it: the stored
        spec with this run's ``run_id``, ``origin``, ``parents`` and time of storing. What a run's report
        and views read instead of ``list(HarnessRecord, run_id=...)``, which holds only the rows it owns."""
        links = self.list(RunHarness, run_id=run_id)
        specs = {h.id: h for h in self.get_many(HarnessRecord, [link.harness_id for link in links])}
        return [specs[link.harness_id].model_copy(update={"run_id": run_id, "origin": link.origin,
                                                          "parents": builtins.list(link.parents),
                                                          "created_at": link.created_at})
                for link in links if link.harness_id in specs]

    def get(self, kind: type[R], id: str, /) -> R | None:
        """The ``kind`` record ``id`` (e.g. ``archive.get(Checkpoint, "base-1")``), or None."""
        entry = stored(kind)
        with self.engine.connect() as conn:
            row = conn.execute(self._query(entry, [entry.table], {"id": id})).mappings().first()
        return entry.record(row) if row is not None else None

    def get_many(self, kind: type[R], ids: Iterable[str], /) -> builtins.list[R]:
        """The ``kind`` records with the given ``ids``, read in one query (per 500 ids), in the order of
        ``ids``: an id not in the archive is left out, a repeated one repeated."""
        ids = builtins.list(ids)
        entry = stored(kind)
        found: dict[str, R] = {}
        with self.engine.connect() as conn:
            for start in range(0, len(set(ids)), 500):
                chunk = sorted(set(ids))[start:start + 500]
                query = self._query(entry, [entry.table], {}).where(entry.table.c.id.in_(chunk))
                found.update((r.id, r) for r in (entry.record(row) for row in conn.execute(query).mappings()))
        return [found[i] for i in ids if i in found]

    def list(self, kind: type[R], /, **where: Any) -> builtins.list[R]:
        """The ``kind`` records whose fields equal every given value (a None value filters nothing;
        trajectories may also be filtered by ``evaluation_id`` and ``run_id``), oldest first (then by
        id). Raises ``ArchiveError`` for an unknown field."""
        entry = stored(kind)
        table = entry.table
        order = (table.c.created_at, table.c.id) if "created_at" in table.c else (table.c.id,)
        with self.engine.connect() as conn:
            rows = conn.execute(self._query(entry, [table], where).order_by(*order)).mappings().all()
        return [entry.record(row) for row in rows]

    def count(self, kind: type[BaseModel], /, **where: Any) -> int:
        """How many ``kind`` records match ``where`` (as ``list`` filters)."""
        entry = stored(kind)
        query = self._query(entry, [func.count()], where).select_from(entry.table)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def resolve_id(self, kind: str, prefix: str) -> str:
        """The full id of the one ``kind`` row (``runs``, ``harnesses``, ``evaluations``,
        ``checkpoints`` (the ``policy_checkpoints`` table), ``trajectories``...) whose id starts with ``prefix``.

        An exact id is never ambiguous. Raises ``ArchiveError`` when none matches and
        ``AmbiguousIdError`` (naming up to five of the ids) when several do: give more characters.
        """
        table = {t.name.removeprefix("policy_"): t for t in self._tables()}.get(kind)
        if table is None:
            raise ArchiveError(f"unknown archive table {kind!r}: one of {[t.name for t in self._tables()]}")
        with self.engine.connect() as conn:  # the exact id first: "base-1" beside "base-1+r0"
            query = select(table.c.id).where(table.c.id.startswith(prefix, autoescape=True))
            ids = conn.execute(query.order_by(table.c.id != prefix, table.c.id).limit(6)).scalars().all()
        if not ids:
            one = kind.removesuffix("es" if kind.endswith("sses") else "s")
            raise ArchiveError(f"no {one} {prefix!r} in {redact(self.url)} (no {one} id starts with it): see "
                               f"`coevo archive list {kind}`")
        if len(ids) > 1 and ids[0] != prefix:
            raise AmbiguousIdError(f"{prefix!r} is ambiguous: several {kind} ids start with it ("
                                   + ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
                                   + "); give more characters of the one you mean", [str(i) for i in ids])
        return str(ids[0])
