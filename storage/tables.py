"""The archive's tables (docs/design.md, Storage), derived from the persisted domain models through one
registry, ``TABLES``.

Each kind of record is a pydantic model declared once, in ``coevo.records`` (``Checkpoint`` and
``Trajectory`` in ``coevo.models``, ``Task`` in ``coevo.envs.base``); ``register`` makes its table:
one column per field, in field order (``id`` the primary key; ``str``/``Literal`` -> a string,
``int``, ``float``, ``bool``; a UTC ``datetime`` -> ``UTCTimestamp``; lists, dicts and nested models
-> JSON, TEXT on SQLite; ``X | None`` nullable), indexed on ``run_id`` and the fields it names. There
are no foreign-key constraints: rows reference each other by id (the loop writes a trajectory before
its evaluation is final, an edit before its child harness is checked) and integrity is kept by
writing each batch in one transaction.

``trajectories`` is the one table that is not a plain mirror: the scalar fields of ``Trajectory``
are columns (for queries), the whole trajectory (calls with their token ids and logprobs) is compact
JSON in ``body`` (``coevo.storage.codec``), beside the ids of the evaluation and run that produced it
and its token/cost totals. A field added to a model becomes a column with no other edit here;
archives created before it lack that column, so add a migration (``storage/README.md``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import UnionType
from typing import Annotated, Any, Literal, Mapping, Union, get_args, get_origin

from pydantic import AwareDatetime, BaseModel
from sqlalchemy import JSON, Boolean, Column, Float, Integer, String, Table, Text
from sqlalchemy.types import TypeDecorator, TypeEngine
from sqlmodel import Field, SQLModel

from coevo.records import (
    Ballot,
    BaseChoice,
    BudgetRecord,
    Checkpoint,
    Decomposition,
    EditRecord,
    EvaluationRecord,
    ExperienceRecord,
    ExportRecord,
    GateDecision,
    HarnessRecord,
    LLMCallRecord,
    ModelProposal,
    Phase,
    PoolMember,
    Profile,
    Promotion,
    RunHarness,
    RunHeartbeat,
    RunRecord,
    Task,
    Trajectory,
)
from coevo.storage import codec
from coevo.timestamps import utcnow

SCHEMA_VERSION = 3
"""The ``schema_version`` table's value: 3 means "managed by Alembic" (``coevo.storage.migrate``); the
release before Alembic (which wrote 1 or 2) refuses such a database with its "upgrade coevo" message."""


class UTCTimestamp(TypeDecorator):
    """A timestamp column stored as Unix seconds (a float: one instant, no zone, the same on every
    backend and in archives written before timestamps were datetimes) and read back as an aware UTC
    ``datetime``. Binds an aware ``datetime`` in any zone or a number; raises ``ValueError`` for a
    naive ``datetime``."""

    impl = Float
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> float | None:
        """The instant as Unix seconds."""
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError(f"naive datetime {value} for a timestamp column: give it a timezone")
            return value.timestamp()
        return None if value is None else float(value)

    def process_result_value(self, value: Any, dialect: Any) -> datetime | None:
        """Unix seconds as an aware UTC ``datetime``."""
        return None if value is None else datetime.fromtimestamp(value, UTC)


class SchemaVersionRow(SQLModel, table=True):
    """One row: the schema version that created the database."""

    __tablename__ = "schema_version"
    id: int = Field(default=1, primary_key=True)
    version: int


def _kinds(annotation: Any) -> tuple[list[Any], bool]:
    """The non-None members of ``annotation`` (``Annotated`` metadata dropped) and whether it admits None."""
    members = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    kinds = [get_args(a)[0] if get_origin(a) is Annotated else a for a in members if a is not type(None)]
    return kinds, type(None) in members


def column_type(annotation: Any) -> tuple[TypeEngine | type[TypeEngine], bool]:
    """The SQL type of a field annotated ``annotation`` and whether its column is nullable (see the
    module docstring)."""
    kinds, nullable = _kinds(annotation)
    kind = kinds[0] if len(kinds) == 1 else None
    if kind is str or get_origin(kind) is Literal:
        return String, nullable
    if kind in (datetime, AwareDatetime):
        return UTCTimestamp, nullable
    for python, sql in ((bool, Boolean), (int, Integer), (float, Float)):
        if kind is python:
            return sql, nullable
    return JSON, nullable


def scalar_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """Names of ``model``'s fields typed ``str``, ``int``, ``float`` or ``bool`` (optionally
    ``| None``), in declaration order."""

    def scalar(annotation: Any) -> bool:
        kinds = _kinds(annotation)[0]
        return len(kinds) == 1 and kinds[0] in (str, int, float, bool)

    return tuple(name for name, field in model.model_fields.items() if scalar(field.annotation))


def _column(name: str, annotation: Any, index: bool, column: str | None = None) -> Column:
    kind, nullable = column_type(annotation)
    return Column(column or name, kind, primary_key=name == "id", nullable=nullable and name != "id", index=index)


class Stored:
    """A registered kind: its ``model``, its ``table`` and the field -> column names that differ
    (``renamed``). ``row`` turns a record into the table's row dict, ``record`` a row back into the
    model; ``columns`` are the names a filter may use."""

    def __init__(self, model: type[BaseModel], table: Table, renamed: Mapping[str, str] | None = None) -> None:
        self.model, self.table, self.renamed = model, table, dict(renamed or {})
        self._fields = {column: field for field, column in self.renamed.items()}

    @property
    def columns(self) -> list[str]:
        """The filterable names: every field (and link column) of the kind."""
        return [self._fields.get(c.name, c.name) for c in self.table.columns]

    def column(self, name: str) -> Any:
        """The table column of field ``name``; raises ``KeyError`` for an unknown name."""
        return self.table.c[self.renamed.get(name, name)]

    def row(self, record: BaseModel) -> dict[str, Any]:
        """``record`` as a row of the table."""
        return {self.renamed.get(k, k): v for k, v in record.model_dump().items()}

    def record(self, row: Mapping[str, Any]) -> Any:
        """The model of a row of the table."""
        return self.model.model_validate({self._fields.get(k, k): v for k, v in row.items()})


class StoredTrajectories(Stored):
    """``Trajectory``'s table (module docstring): scalar fields, totals, the codec's ``body`` and the
    ``evaluation_id``/``run_id`` links a row is written with."""

    TOTALS = {"input_tokens": Integer, "output_tokens": Integer, "cost_usd": Float}
    """``Trajectory`` properties (sums over its model calls) stored as columns."""

    def __init__(self) -> None:
        fields = [n for n in scalar_fields(Trajectory) if n != "id"]
        hints = Trajectory.model_fields
        table = Table("trajectories", SQLModel.metadata,
                      _column("id", str, False),
                      Column("evaluation_id", String, nullable=True, index=True),
                      Column("run_id", String, nullable=True, index=True),
                      *(_column(n, hints[n].annotation, n in ("task_id", "harness_id")) for n in fields),
                      *(Column(n, kind, nullable=False) for n, kind in self.TOTALS.items()),
                      Column("body", Text, nullable=False), Column("created_at", UTCTimestamp, nullable=False))
        super().__init__(Trajectory, table)
        self.stored = (*fields, *self.TOTALS)

    def row(self, record: BaseModel, evaluation_id: str | None = None, run_id: str | None = None) -> dict[str, Any]:
        """The row of trajectory ``record`` produced by evaluation ``evaluation_id`` in run ``run_id``."""
        return {"id": record.id, **{n: getattr(record, n) for n in self.stored},  # type: ignore[attr-defined]
                "evaluation_id": evaluation_id, "run_id": run_id, "body": codec.encode(record),  # type: ignore[arg-type]
                "created_at": utcnow()}

    def record(self, row: Mapping[str, Any]) -> Trajectory:
        """The trajectory in the row's ``body``."""
        return codec.decode(row["body"])


TABLES: dict[type[BaseModel], Stored] = {}
"""The registry: each persisted model -> its table (``register``), in registration order."""


def register(model: type[BaseModel], name: str, index: tuple[str, ...] = (),
             renamed: Mapping[str, str] | None = None) -> Stored:
    """Derive table ``name`` from ``model`` (module docstring), indexed on ``run_id`` and ``index``, with
    the field -> column names in ``renamed`` (a field whose name SQLAlchemy reserves), and add it to
    ``TABLES`` and ``SQLModel.metadata`` (what ``create_all`` and the migrations compare with)."""
    renamed = dict(renamed or {})
    columns = [_column(f, info.annotation, f in (*index, "run_id"), renamed.get(f))
               for f, info in model.model_fields.items()]
    TABLES[model] = Stored(model, Table(name, SQLModel.metadata, *columns), renamed)
    return TABLES[model]


register(RunRecord, "runs")
register(RunHeartbeat, "run_heartbeats")  # a beat never rewrites the run's row
register(HarnessRecord, "harnesses")
register(EditRecord, "edits", ("parent_id",))
register(Checkpoint, "policy_checkpoints")  # "checkpoints" is LangGraph's checkpointer table in the same DB
register(Task, "tasks", ("env",), renamed={"metadata": "task_metadata"})
register(EvaluationRecord, "evaluations", ("harness_id",))
TABLES[Trajectory] = StoredTrajectories()
register(GateDecision, "gate_decisions")
register(Profile, "profiles", ("harness_id",))
register(PoolMember, "pool_members", ("harness_id",))
register(Ballot, "votes", ("task_id",))
register(LLMCallRecord, "llm_calls")
register(BudgetRecord, "budgets")
register(Phase, "phases")
register(BaseChoice, "base_choices")
register(ModelProposal, "model_proposals")
register(Promotion, "promotions")
register(ExperienceRecord, "experience", ("lineage",))
register(Decomposition, "decompositions")
register(ExportRecord, "exports", ("harness_id",))
register(RunHarness, "run_harnesses", ("harness_id",))  # a run's harnesses, those another run stored first included
