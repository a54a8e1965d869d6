"""``Archive``: the one class that reads and writes the coevo database (DESIGN.md, Storage).

A SQLite file in WAL mode by default (``Archive("runs/coevo.db")``), or any SQLAlchemy URL
(``Archive("postgresql+psycopg://...")``) for shared or large runs. Every ``add_*`` is an idempotent
upsert by id in one transaction, so a resumed run rewrites rather than duplicates rows; a list
passed to one call (a task's rollouts, a batch of edits) is written all-or-nothing. Methods take
and return pydantic objects (``Trajectory``, ``Task``, the ``*Record`` models), never ORM rows.

A write the database refuses for lack of space (a full disk, a quota, PostgreSQL's ``disk_full``)
raises ``ArchiveFullError``: nothing of that write is stored, and the run it belongs to can be
resumed once there is space.

Writes are serialised by a lock, so one ``Archive`` may be shared by threads (the evaluator
persists from a worker thread while rollouts continue on the event loop); several processes may
write one archive at once (SQLite: WAL, writers begin ``IMMEDIATE`` and wait up to 30 s; PostgreSQL:
row-level upserts).

No ORM row is ever attached to a session: a record returned here is a plain value, so changing it
(a JSON dict in place included) changes nothing stored until it is written back whole with
``add_*``; ``update_run`` writes only the columns it names. Timestamps are UTC-aware ``datetime``s
on every backend (``coevo.timestamps``), stored as Unix seconds.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence, TypeVar

from sqlalchemy import Table, delete, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DatabaseError
from sqlmodel import SQLModel

from coevo.envs.base import Task
from coevo.masking import redact
from coevo.models.trajectory import Trajectory
from coevo.storage import codec
from coevo.storage.connection import database_url, make_engine, writing
from coevo.storage.errors import AmbiguousIdError, ArchiveError, ArchiveFullError, disk_full
from coevo.storage.errors import SchemaVersionError as SchemaVersionError  # re-exported
from coevo.storage.heartbeats import HeartbeatRecord, HeartbeatRow
from coevo.storage.migrate import head, prepare, up_to_date
from coevo.storage.tables import (
    TRAJECTORY_FIELDS,
    TRAJECTORY_TOTALS,
    BaseChoiceRecord,
    BaseChoiceRow,
    BudgetRecord,
    BudgetRow,
    CheckpointRecord,
    CheckpointRow,
    EditRecord,
    EditRow,
    EvaluationRecord,
    EvaluationRow,
    GateDecisionRecord,
    GateDecisionRow,
    HarnessRecord,
    HarnessRow,
    LLMCallRecord,
    LLMCallRow,
    ModelProposalRecord,
    ModelProposalRow,
    PhaseRecord,
    PhaseRow,
    PoolMemberRecord,
    PoolMemberRow,
    ProfileRecord,
    ProfileRow,
    PromotionRecord,
    PromotionRow,
    RunRecord,
    RunRow,
    SchemaVersionRow,
    TaskRow,
    TrajectoryRow,
    VoteRecord,
    VoteRow,
)
from coevo.timestamps import utcnow

R = TypeVar("R", bound=SQLModel)

_CHUNK = 500
"""Rows per DELETE ... IN (...) statement in the portable upsert (well under SQLite's limit)."""

_INHERITANCE: dict[type, type[SQLModel]] = {BaseChoiceRecord: BaseChoiceRow, ModelProposalRecord: ModelProposalRow,
                                           PromotionRecord: PromotionRow}
"""CoEvo-RSI record kind -> its table's row class."""


def _trajectory_row(traj: Trajectory, evaluation_id: str | None, run_id: str | None) -> dict[str, Any]:
    row = {name: getattr(traj, name) for name in (*TRAJECTORY_FIELDS, *TRAJECTORY_TOTALS)}
    row.update(evaluation_id=evaluation_id, run_id=run_id, body=codec.encode(traj), created_at=utcnow())
    return row


class Archive:
    """The coevo archive: runs, harnesses, edits, checkpoints, tasks, evaluations, trajectories,
    gate decisions, profiles and LLM calls.

    Args: ``target`` a file path (SQLite, WAL; parent directories are created), ``":memory:"``,
    or any SQLAlchemy URL (``postgresql+psycopg://user@host/db``); ``migrate`` (default) brings an
    older database up to date on open (``coevo.storage.migrate.prepare``; ``revision`` is then the
    head), ``False`` opens it as it is. Raises ``SchemaVersionError`` when the database was created
    by a newer schema (upgrade coevo, or point at another database) and ``ArchiveError`` when it
    cannot be opened.
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
            raise ArchiveError(f"cannot open archive {redact(str(target))}: {redact(str(exc.orig))}; check the path "
                               "or URL") from exc
        except ImportError as exc:  # the URL's driver (psycopg for postgresql+psycopg://)
            raise ArchiveError(f"cannot open archive {redact(str(target))}: its driver {exc.name} is not installed: "
                               "pip install 'coevo[postgres]' for PostgreSQL") from None
        self._writer = writing(self.engine)

    @staticmethod
    def _tables() -> list[Table]:
        """Every archive table, in ``storage/tables.py``'s declaration order: ``SQLModel.metadata``,
        the same set ``create_all`` and the migrations work from (a new table needs no entry here)."""
        return list(SQLModel.metadata.tables.values())

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- generic helpers -------------------------------------------------------------------

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
            conn.execute(table.insert().prefix_with("OR REPLACE"), list(rows))
        elif dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            stmt = pg_insert(table)
            stmt = stmt.on_conflict_do_update(
                index_elements=["id"], set_={c.name: stmt.excluded[c.name] for c in table.columns if c.name != "id"})
            conn.execute(stmt, list(rows))
        else:
            for start in range(0, len(ids), _CHUNK):
                conn.execute(delete(table).where(table.c.id.in_(ids[start:start + _CHUNK])))
            conn.execute(table.insert(), list(rows))

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

    def _write(self, table: Table, rows: Sequence[dict[str, Any]]) -> None:
        with self._transaction(f"{len(rows)} row(s) of {table.name}") as conn:
            self._upsert(conn, table, rows)

    def _put(self, row_cls: type[SQLModel], records: Iterable[SQLModel]) -> None:
        self._write(row_cls.__table__, [r.model_dump() for r in records])  # type: ignore[attr-defined]

    def _get(self, row_cls: type[SQLModel], record_cls: type[R], id: str) -> R | None:
        table = row_cls.__table__  # type: ignore[attr-defined]
        with self.engine.connect() as conn:
            row = conn.execute(select(table).where(table.c.id == id)).mappings().first()
        return record_cls.model_validate(dict(row)) if row is not None else None

    def _list(self, row_cls: type[SQLModel], record_cls: type[R], **where: Any) -> list[R]:
        table = row_cls.__table__  # type: ignore[attr-defined]
        query = select(table)
        for column, value in where.items():
            if value is not None:
                query = query.where(table.c[column] == value)
        if "created_at" in table.c:
            query = query.order_by(table.c.created_at, table.c.id)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [record_cls.model_validate(dict(row)) for row in rows]

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
                                   + "); give more characters of the one you mean")
        return str(ids[0])

    # -- runs, harnesses, edits, checkpoints -----------------------------------------------

    def add_run(self, run: RunRecord) -> None:
        """Insert or replace a run."""
        self._put(RunRow, [run])

    def update_run(self, id: str, **changes: Any) -> None:
        """Set only the named columns of run ``id`` (e.g. ``status="done"``, ``config={...}``) and its
        ``updated_at`` to now, in one ``UPDATE``: concurrent writers of other columns or rows are never
        overwritten with stale values. Raises ``ArchiveError`` for an unknown run or column."""
        table = RunRow.__table__  # type: ignore[attr-defined]
        settable = set(table.c.keys()) - {"id"}
        if set(changes) - settable:
            raise ArchiveError(f"update_run cannot set {sorted(set(changes) - settable)}: one of {sorted(settable)}")
        values = RunRecord.model_validate({"id": id, **changes}).model_dump(include=set(changes))
        with self._transaction(f"run {id}'s {', '.join(changes)}") as conn:
            done = conn.execute(table.update().where(table.c.id == id).values(**values, updated_at=utcnow()))
        if done.rowcount != 1:
            raise ArchiveError(f"no run {id!r} in {redact(self.url)} to update: see `coevo archive list runs`")

    def beat(self, run_id: str, host: str, pid: int) -> None:
        """Record that process ``pid`` on ``host`` runs ``run_id`` and is alive now (``run_heartbeats``)."""
        self._put(HeartbeatRow, [HeartbeatRecord(id=run_id, host=host, pid=pid)])

    def heartbeats(self) -> dict[str, HeartbeatRecord]:
        """Every run's last heartbeat, by run id (runs that never beat are absent)."""
        return {h.id: h for h in self._list(HeartbeatRow, HeartbeatRecord)}

    def get_run(self, id: str) -> RunRecord | None:
        """The run ``id``, or None."""
        return self._get(RunRow, RunRecord, id)

    def list_runs(self) -> list[RunRecord]:
        """All runs, oldest first."""
        return self._list(RunRow, RunRecord)

    def add_harness(self, spec: Any, parents: Sequence[str] | None = None, origin: str = "",
                    run_id: str | None = None) -> str:
        """Store a harness spec; returns its id.

        Args: ``spec`` a ``HarnessSpec`` (its ``id`` and ``model_dump(mode="json")`` are used) or a
        ``HarnessRecord``; ``parents`` default to the spec's own ``parents`` field when it has one.
        """
        if isinstance(spec, HarnessRecord):
            record = spec
        else:
            if not hasattr(spec, "id") or not hasattr(spec, "model_dump"):
                raise ArchiveError(f"add_harness needs a HarnessSpec or HarnessRecord, got {type(spec).__name__}")
            record = HarnessRecord(
                id=spec.id, spec=spec.model_dump(mode="json"),
                parents=list(parents if parents is not None else getattr(spec, "parents", None) or []),
                origin=origin, run_id=run_id,
            )
        self._put(HarnessRow, [record])
        return record.id

    def get_harness(self, id: str) -> HarnessRecord | None:
        """The harness ``id`` (``record.spec`` is the spec dict for ``load_harness``), or None."""
        return self._get(HarnessRow, HarnessRecord, id)

    def list_harnesses(self, run_id: str | None = None) -> list[HarnessRecord]:
        """Harnesses (of ``run_id`` when given), oldest first."""
        return self._list(HarnessRow, HarnessRecord, run_id=run_id)

    def add_edits(self, edits: Sequence[EditRecord]) -> None:
        """Insert or replace edits, all in one transaction."""
        self._put(EditRow, edits)

    def list_edits(self, run_id: str | None = None, parent_id: str | None = None) -> list[EditRecord]:
        """Edits filtered by run and/or parent harness, oldest first."""
        return self._list(EditRow, EditRecord, run_id=run_id, parent_id=parent_id)

    def add_checkpoint(self, checkpoint: CheckpointRecord) -> None:
        """Insert or replace a checkpoint."""
        self._put(CheckpointRow, [checkpoint])

    def get_checkpoint(self, id: str) -> CheckpointRecord | None:
        """The checkpoint ``id``, or None."""
        return self._get(CheckpointRow, CheckpointRecord, id)

    def list_checkpoints(self, run_id: str | None = None) -> list[CheckpointRecord]:
        """Checkpoints, oldest first."""
        return self._list(CheckpointRow, CheckpointRecord, run_id=run_id)

    # -- tasks, evaluations, trajectories --------------------------------------------------

    def add_tasks(self, tasks: Sequence[Task]) -> None:
        """Store tasks as the policy saw them (the ``Task`` model has no gold answer)."""
        rows = [{"id": t.id, "env": t.env, "split": t.split, "prompt": t.prompt, "task_metadata": t.metadata}
                for t in tasks]
        self._write(TaskRow.__table__, rows)  # type: ignore[attr-defined]

    def get_task(self, id: str) -> Task | None:
        """The task ``id`` as a ``Task``, or None."""
        table = TaskRow.__table__  # type: ignore[attr-defined]
        with self.engine.connect() as conn:
            row = conn.execute(select(table).where(table.c.id == id)).mappings().first()
        if row is None:
            return None
        return Task(id=row["id"], env=row["env"], split=row["split"], prompt=row["prompt"],
                    metadata=row["task_metadata"] or {})

    def add_evaluation(self, evaluation: EvaluationRecord) -> None:
        """Insert or replace an evaluation (call again with ``status="done"`` and aggregates)."""
        self._put(EvaluationRow, [evaluation])

    def get_evaluation(self, id: str) -> EvaluationRecord | None:
        """The evaluation ``id``, or None."""
        return self._get(EvaluationRow, EvaluationRecord, id)

    def list_evaluations(self, run_id: str | None = None, harness_id: str | None = None) -> list[EvaluationRecord]:
        """Evaluations filtered by run and/or harness, oldest first."""
        return self._list(EvaluationRow, EvaluationRecord, run_id=run_id, harness_id=harness_id)

    def add_trajectories(self, trajectories: Sequence[Trajectory], evaluation_id: str | None = None,
                         run_id: str | None = None) -> None:
        """Persist a batch of trajectories in ONE transaction (all or none), upserting by id.

        Every ``Trajectory`` field is kept, including each call's token ids and logprobs.
        """
        rows = [_trajectory_row(t, evaluation_id, run_id) for t in trajectories]
        self._write(TrajectoryRow.__table__, rows)  # type: ignore[attr-defined]

    def get_trajectory(self, id: str) -> Trajectory | None:
        """The trajectory ``id``, or None."""
        found = self.trajectories(id=id)
        return found[0] if found else None

    def trajectories(self, id: str | None = None, evaluation_id: str | None = None,
                     run_id: str | None = None, harness_id: str | None = None,
                     task_id: str | None = None, split: str | None = None) -> list[Trajectory]:
        """Trajectories matching every given filter, in insertion order."""
        table = TrajectoryRow.__table__  # type: ignore[attr-defined]
        query = select(table.c.body)
        filters = {"id": id, "evaluation_id": evaluation_id, "run_id": run_id, "harness_id": harness_id,
                   "task_id": task_id, "split": split}
        for column, value in filters.items():
            if value is not None:
                query = query.where(table.c[column] == value)
        with self.engine.connect() as conn:
            bodies = conn.execute(query.order_by(table.c.created_at, table.c.id)).scalars().all()
        return [codec.decode(body) for body in bodies]

    def count_trajectories(self, evaluation_id: str | None = None) -> int:
        """Number of stored trajectories (of one evaluation when given)."""
        table = TrajectoryRow.__table__  # type: ignore[attr-defined]
        query = select(func.count()).select_from(table)
        if evaluation_id is not None:
            query = query.where(table.c.evaluation_id == evaluation_id)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    # -- gate, profiles, LLM calls ---------------------------------------------------------

    def add_gate_decision(self, decision: GateDecisionRecord) -> None:
        """Insert or replace a gate decision."""
        self._put(GateDecisionRow, [decision])

    def list_gate_decisions(self, run_id: str | None = None) -> list[GateDecisionRecord]:
        """Gate decisions (of ``run_id``), oldest first."""
        return self._list(GateDecisionRow, GateDecisionRecord, run_id=run_id)

    def add_profiles(self, profiles: Sequence[ProfileRecord]) -> None:
        """Insert or replace profiles in one transaction."""
        self._put(ProfileRow, profiles)

    def list_profiles(self, run_id: str | None = None, harness_id: str | None = None) -> list[ProfileRecord]:
        """Profiles filtered by run and/or harness, oldest first."""
        return self._list(ProfileRow, ProfileRecord, run_id=run_id, harness_id=harness_id)

    def add_pool_members(self, members: Sequence[PoolMemberRecord]) -> None:
        """Insert or replace Harness-S pool members in one transaction."""
        self._put(PoolMemberRow, members)

    def list_pool_members(self, run_id: str | None = None) -> list[PoolMemberRecord]:
        """The pool members (of ``run_id``), oldest first."""
        return self._list(PoolMemberRow, PoolMemberRecord, run_id=run_id)

    def add_votes(self, votes: Sequence[VoteRecord]) -> None:
        """Insert or replace router ballots in one transaction."""
        self._put(VoteRow, votes)

    def list_votes(self, run_id: str | None = None, task_id: str | None = None) -> list[VoteRecord]:
        """Router ballots filtered by run and/or task, oldest first."""
        return self._list(VoteRow, VoteRecord, run_id=run_id, task_id=task_id)

    def add_llm_calls(self, calls: Sequence[LLMCallRecord]) -> None:
        """Insert or replace meta-role LLM call records in one transaction."""
        self._put(LLMCallRow, calls)

    def list_llm_calls(self, run_id: str | None = None, role: str | None = None) -> list[LLMCallRecord]:
        """LLM calls filtered by run and/or role, oldest first."""
        return self._list(LLMCallRow, LLMCallRecord, run_id=run_id, role=role)

    # -- budgets ---------------------------------------------------------------------------

    def add_budget(self, record: BudgetRecord) -> bool:
        """Store ``record`` unless a budget row with its id exists (what it names was paid for
        already); returns whether it was stored."""
        with self._lock:
            if self._get(BudgetRow, BudgetRecord, record.id) is not None:
                return False
            self._put(BudgetRow, [record])
        return True

    def list_budgets(self, run_id: str | None = None) -> list[BudgetRecord]:
        """Budget rows (of ``run_id``), oldest first."""
        return self._list(BudgetRow, BudgetRecord, run_id=run_id)

    # -- phases ----------------------------------------------------------------------------

    def add_phases(self, phases: Sequence[PhaseRecord]) -> None:
        """Insert or replace phase records (WHALE-style alternating runs) in one transaction."""
        self._put(PhaseRow, phases)

    def list_phases(self, run_id: str | None = None) -> list[PhaseRecord]:
        """Phases (of ``run_id``), oldest first."""
        return self._list(PhaseRow, PhaseRecord, run_id=run_id)

    # -- CoEvo-RSI inheritance: base choices, model proposals, promotions ------------------

    def add_inheritance(self, records: Sequence[BaseChoiceRecord | ModelProposalRecord | PromotionRecord]) -> None:
        """Insert or replace CoEvo-RSI records (base choices, model proposals, promotions), each kind
        in its own table, all in one transaction."""
        with self._transaction(f"{len(records)} inheritance record(s)") as conn:
            for record_cls, row_cls in _INHERITANCE.items():
                batch = [r.model_dump() for r in records if type(r) is record_cls]
                self._upsert(conn, row_cls.__table__, batch)  # type: ignore[attr-defined]

    def list_inheritance(self, kind: type[R], run_id: str | None = None) -> list[R]:
        """The CoEvo-RSI records of ``kind`` (``BaseChoiceRecord``, ``ModelProposalRecord`` or
        ``PromotionRecord``) of ``run_id``, oldest first."""
        return self._list(_INHERITANCE[kind], kind, run_id=run_id)  # type: ignore[index]
