"""The archive's tables (DESIGN.md, Storage), declared once.

Each ``*Record`` is a pydantic (plain SQLModel) model: it is what ``Archive`` methods accept and
return. Each ``*Row`` with ``table=True`` is its SQL table. JSON fields use the SQL JSON
type (TEXT on SQLite). There are no foreign-key constraints: rows reference each other by id
(the loop writes a trajectory before its evaluation is final, an edit before its child harness
is checked) and integrity is kept by writing each batch in one transaction.

Two tables mirror a domain model instead of repeating its fields: ``policy_checkpoints`` has one
column per ``coevo.training.checkpoint.Checkpoint`` field (``Checkpoint`` is its record), and
``trajectories`` one column per scalar field of ``coevo.models.trajectory.Trajectory``, the whole
trajectory (calls with their token ids and logprobs) as compact JSON in ``body``
(``coevo.storage.codec``), the ids of the evaluation and run that produced it and its token/cost
totals. A field added to either model becomes a column here with no other edit; archives created
before it lack that column, so add a migration that adds it (``storage/README.md``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import AwareDatetime, BaseModel, field_validator
from sqlalchemy import JSON, Float, Text
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel

from coevo.masking import redact_data
from coevo.models.trajectory import Trajectory
from coevo.timestamps import UTCTime, utcnow
from coevo.training.checkpoint import Checkpoint

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


def _created() -> Any:
    """A ``created_at``-style field: a ``UTCTime`` defaulting to now, stored as ``UTCTimestamp``."""
    return Field(default_factory=utcnow, sa_type=UTCTimestamp)


def _now() -> float:
    """Now in Unix seconds: the default of tables declared with ``float`` timestamps before
    ``UTCTime`` (kept so such declarations merge; new tables use ``_created()``)."""
    return time.time()


def scalar_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """Names of ``model``'s fields typed ``str``, ``int``, ``float`` or ``bool`` (optionally
    ``| None``), in declaration order."""

    def scalar(annotation: Any) -> bool:
        union = get_origin(annotation) in (Union, UnionType)
        kinds = [a for a in get_args(annotation) if a is not type(None)] if union else [annotation]
        return len(kinds) == 1 and kinds[0] in (str, int, float, bool)

    return tuple(name for name, field in model.model_fields.items() if scalar(field.annotation))


def _mirror(model: type[BaseModel], name: str, index: bool = False) -> tuple[Any, Any]:
    """Field ``name`` of ``model`` as a column ``(annotation, Field)``: ``id`` is the primary key,
    lists and dicts are JSON, ``X | None`` is nullable. No Python default: the archive always
    writes whole records."""
    annotation = model.model_fields[name].annotation
    json = get_origin(annotation) in (list, dict) or annotation in (list, dict)
    kind = JSON if json else UTCTimestamp if annotation in (datetime, AwareDatetime) else None
    return annotation, Field(primary_key=name == "id", index=index, **({"sa_type": kind} if kind else {}))


def _table(name: str, tablename: str, doc: str, columns: dict[str, tuple[Any, Any]]) -> Any:
    """A SQLModel table class ``name`` for table ``tablename`` with ``columns`` (``name ->
    (annotation, Field)``) in order: what ``class name(SQLModel, table=True)`` would declare."""
    namespace = {"__module__": __name__, "__qualname__": name, "__doc__": doc, "__tablename__": tablename,
                 "__annotations__": {col: annotation for col, (annotation, _) in columns.items()},
                 **{col: field for col, (_, field) in columns.items()}}
    return type(SQLModel)(name, (SQLModel,), namespace, table=True)


class SchemaVersionRow(SQLModel, table=True):
    """One row: the schema version that created the database."""

    __tablename__ = "schema_version"
    id: int = Field(default=1, primary_key=True)
    version: int


class RunRecord(SQLModel):
    """One invocation of the loop or of ``coevo eval``: ``strategy`` (e.g. ``vace``, ``eval``),
    its full ``config``, ``status`` (``running``/``done``/``failed``), UTC-aware timestamps."""

    id: str = Field(primary_key=True)
    strategy: str = ""
    config: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    status: str = "running"
    created_at: UTCTime = _created()
    updated_at: UTCTime = _created()

    @field_validator("config")
    @classmethod
    def _no_secrets(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The config with every secret masked (``coevo.masking``): a database password or API key is
        never stored, and one stored by an older coevo is never read back."""
        return redact_data(config)


class RunRow(RunRecord, table=True):
    """The ``runs`` table: one row per ``RunRecord``."""

    __tablename__ = "runs"


class HarnessRecord(SQLModel):
    """A harness spec: ``id`` = its sha256 spec id, ``spec`` its canonical JSON as a dict,
    ``parents`` the parent spec ids, ``origin`` how it was made (``base``, ``edit``, ``file``...)."""

    id: str = Field(primary_key=True)
    spec: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    parents: list[str] = Field(default_factory=list, sa_type=JSON)
    origin: str = ""
    run_id: str | None = Field(default=None, index=True)
    created_at: UTCTime = _created()


class HarnessRow(HarnessRecord, table=True):
    """The ``harnesses`` table: one row per ``HarnessRecord``."""

    __tablename__ = "harnesses"


class EditRecord(SQLModel):
    """An RFC 6902 ``patch`` proposed by an editor on ``parent_id`` giving ``child_id``, with its
    ``rationale``, the repair ``direction`` it targets, and its fate: ``status``
    (``proposed``/``rejected``/``checked``/``accepted``...) and ``reason``."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    round: int = 0
    parent_id: str = Field(default="", index=True)
    child_id: str | None = None
    patch: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON)
    rationale: str = ""
    direction: str = ""
    status: str = "proposed"
    reason: str = ""
    created_at: UTCTime = _created()


class EditRow(EditRecord, table=True):
    """The ``edits`` table: one row per ``EditRecord``."""

    __tablename__ = "edits"


CheckpointRecord = Checkpoint
"""The archive's checkpoint record is ``coevo.training.checkpoint.Checkpoint`` itself."""

CheckpointRow = _table(
    "CheckpointRow", "policy_checkpoints",  # "checkpoints" is LangGraph's checkpointer table in the same DB
    "A ``Checkpoint``: one column per field.",
    {name: _mirror(Checkpoint, name, index=name == "run_id") for name in Checkpoint.model_fields})


class TaskRow(SQLModel, table=True):
    """A ``coevo.envs.base.Task`` as the policy saw it (never its gold answer)."""

    __tablename__ = "tasks"
    id: str = Field(primary_key=True)
    env: str = Field(default="", index=True)
    split: str = ""
    prompt: str = ""
    task_metadata: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)


class EvaluationRecord(SQLModel):
    """One evaluation: harness × checkpoint × env × split × ``seeds`` (one seed per rollout index,
    ``k`` rollouts per task). ``aggregates`` holds the ``EvalResult`` numbers; ``status`` is
    ``running`` until they are written, then ``done``."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    harness_id: str = Field(default="", index=True)
    checkpoint_id: str = ""
    env: str = ""
    split: str = ""
    seeds: list[int] = Field(default_factory=list, sa_type=JSON)
    k: int = 1
    task_ids: list[str] = Field(default_factory=list, sa_type=JSON)
    aggregates: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    status: str = "running"
    created_at: UTCTime = _created()


class EvaluationRow(EvaluationRecord, table=True):
    """The ``evaluations`` table: one row per ``EvaluationRecord``."""

    __tablename__ = "evaluations"


TRAJECTORY_FIELDS = scalar_fields(Trajectory)
"""The ``Trajectory`` fields stored as columns (for queries) besides the whole trajectory in ``body``."""

TRAJECTORY_TOTALS = {"input_tokens": int, "output_tokens": int, "cost_usd": float}
"""``Trajectory`` properties (sums over its model calls) stored as columns."""

TrajectoryRow = _table(
    "TrajectoryRow", "trajectories",
    "A ``Trajectory``: its scalar fields and totals as columns, the whole trajectory in ``body``\n"
    "(``coevo.storage.codec`` JSON: messages, calls with token ids and logprobs, hook events, score\n"
    "detail), plus ``evaluation_id``/``run_id``.",
    {"id": _mirror(Trajectory, "id"),
     "evaluation_id": (str | None, Field(default=None, index=True)),
     "run_id": (str | None, Field(default=None, index=True)),
     **{name: _mirror(Trajectory, name, index=name in ("task_id", "harness_id"))
        for name in TRAJECTORY_FIELDS if name != "id"},
     **{name: (kind, Field()) for name, kind in TRAJECTORY_TOTALS.items()},
     "body": (str, Field(sa_type=Text)),
     "created_at": (UTCTime, _created())})


class GateDecisionRecord(SQLModel):
    """The validation gate's verdict in ``round``: incumbent score ``b`` vs candidate score ``c``
    (VACE Algorithm 1), ``accepted``, the ``reason``, and the per-task outcome ``pairs``."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    round: int = 0
    incumbent_id: str = ""
    candidate_id: str = ""
    b: float = 0.0
    c: float = 0.0
    accepted: bool = False
    reason: str = ""
    pairs: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON)
    created_at: UTCTime = _created()


class GateDecisionRow(GateDecisionRecord, table=True):
    """The ``gate_decisions`` table: one row per ``GateDecisionRecord``."""

    __tablename__ = "gate_decisions"


class ProfileRecord(SQLModel):
    """A capability profile of a harness (Harness-S): e.g. success per task category on train."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    round: int = 0
    harness_id: str = Field(default="", index=True)
    checkpoint_id: str = ""
    profile: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: UTCTime = _created()


class ProfileRow(ProfileRecord, table=True):
    """The ``profiles`` table: one row per ``ProfileRecord``."""

    __tablename__ = "profiles"


class PoolMemberRecord(SQLModel):
    """A Harness-S sibling in a run's pool (Eq. 4): lineage (``parent``), evolution ``round`` (-1 for
    H0), the ``direction`` and ``causes`` it targets, its val score under the frozen policy, the val
    tasks it solved (V(H), Eq. 3) and whether Eq. 3 chose it as a next-round parent."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    harness_id: str = Field(default="", index=True)
    parent: str | None = None
    round: int = -1
    direction: str = ""
    causes: list[str] = Field(default_factory=list, sa_type=JSON)
    val_score: float | None = None
    solved: list[str] = Field(default_factory=list, sa_type=JSON)
    selected: bool = False
    created_at: float = Field(default_factory=_now)


class PoolMemberRow(PoolMemberRecord, table=True):
    """The ``pool_members`` table: one row per ``PoolMemberRecord``."""

    __tablename__ = "pool_members"


class VoteRecord(SQLModel):
    """One router voter's ballot on one task (Harness-S Eq. 9): the ranked harness ids (best first),
    the ``purpose`` of the routing (``rescue``, ``rank`` or ``app``), the checkpoint whose profiles
    it read, and ``reason`` when the voter's reply was ignored."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    checkpoint_id: str = ""
    task_id: str = Field(default="", index=True)
    voter: str = ""
    purpose: str = ""
    ranking: list[str] = Field(default_factory=list, sa_type=JSON)
    reason: str = ""
    created_at: float = Field(default_factory=_now)


class VoteRow(VoteRecord, table=True):
    """The ``votes`` table: one row per ``VoteRecord``."""

    __tablename__ = "votes"


class LLMCallRecord(SQLModel):
    """One meta-role LLM call (curator, editor, voter, profiler): tokens, cost (USD), latency (s)."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    role: str = ""
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    request: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    response: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: UTCTime = _created()


class LLMCallRow(LLMCallRecord, table=True):
    """The ``llm_calls`` table: one row per ``LLMCallRecord``."""

    __tablename__ = "llm_calls"


class BudgetRecord(SQLModel):
    """What one phase of a run spent (WHALE §6 and VACE compare strategies at equal rollout budgets):
    ``round`` and ``phase`` (the meta-graph node that spent it: ``train``, ``stage_effect``, ``check``,
    ``validate``, ``final_test``, ...) identify the phase; ``split`` the task split its rollouts ran
    on (``""`` for meta-LLM calls); ``rollouts`` episodes run, ``policy_input_tokens`` /
    ``policy_output_tokens`` the policy model's prompt / sampled tokens over them and
    ``policy_cost_usd`` its cost (USD; 0 for a local model), ``meta_calls`` /
    ``meta_input_tokens`` / ``meta_output_tokens`` / ``meta_cost_usd`` (USD) the meta roles' LLM calls.
    ``id`` names what was paid for (an evaluation, a weight stage, a batch of LLM calls), so work
    reused by a later phase or a resume is counted once (``coevo.meta.budget``)."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    round: int = 0
    phase: str = ""
    split: str = ""
    rollouts: int = 0
    policy_input_tokens: int = 0
    policy_output_tokens: int = 0
    policy_cost_usd: float = 0.0
    meta_calls: int = 0
    meta_input_tokens: int = 0
    meta_output_tokens: int = 0
    meta_cost_usd: float = 0.0
    created_at: float = Field(default_factory=_now)


class BudgetRow(BudgetRecord, table=True):
    """The ``budgets`` table: one row per ``BudgetRecord`` (new in this release: created by
    ``create_all`` on any archive; no column of an older table changed)."""

    __tablename__ = "budgets"


class PhaseRecord(SQLModel):
    """One finished phase of an alternating run (WHALE §4, FST, stagewise, PACE; ``coevo.meta.state.Phase``):
    its ``index`` in the run, ``cycle``, ``kind`` (weights, harness, prompt, control), ``length`` in
    ``unit``, ``steps``, the harness and checkpoint it ended with, its training signal, the fields
    it could edit, why it stopped, and when it ran (``started_at``/``ended_at``, UNIX seconds: the
    window in which the run's evaluations, trajectories and LLM calls belong to it)."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    index: int = 0
    cycle: int = 0
    kind: str = ""
    length: float = 0.0
    unit: str = ""
    steps: int = 0
    harness_id: str = ""
    checkpoint: str = ""
    signal: list[float] = Field(default_factory=list, sa_type=JSON)
    fields: list[str] | None = Field(default=None, sa_type=JSON)
    stop_reason: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    created_at: float = Field(default_factory=_now)


class PhaseRow(PhaseRecord, table=True):
    """The ``phases`` table: one row per ``PhaseRecord``."""

    __tablename__ = "phases"


class BaseChoiceRecord(SQLModel):
    """CoEvo-RSI Harness Inheritance: the base an editor chose from the archive A<t for a brief in
    ``round`` (``index`` in the archive summary it saw, ``base_id``; the incumbent was
    ``incumbent_id``), the candidate it became (``candidate_id``, ``child_id`` once applied), why
    (``reason``) and the ``evidence`` it was shown (the direction and the summary rows)."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    round: int = 0
    direction: str = ""
    index: int = 0
    base_id: str = ""
    incumbent_id: str = ""
    candidate_id: str = ""
    child_id: str | None = None
    reason: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: float = Field(default_factory=_now)


class BaseChoiceRow(BaseChoiceRecord, table=True):
    """The ``base_choices`` table: one row per ``BaseChoiceRecord``."""

    __tablename__ = "base_choices"


class ModelProposalRecord(SQLModel):
    """CoEvo-RSI Model Inheritance: one initialisation proposed for ``harness_id`` in ``round``
    (``kind`` select | merge over ``sources`` with coefficients ``alpha``), the checkpoint it gave,
    its ``status`` (scored | refused, ``reason``) and its validation ``val`` score and ``timr``."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    round: int = 0
    harness_id: str = ""
    kind: str = ""
    sources: list[str] = Field(default_factory=list, sa_type=JSON)
    alpha: list[float] = Field(default_factory=list, sa_type=JSON)
    checkpoint_id: str | None = None
    status: str = ""
    reason: str = ""
    val: float | None = None
    timr: float | None = None
    evaluation_id: str | None = None
    created_at: float = Field(default_factory=_now)


class ModelProposalRow(ModelProposalRecord, table=True):
    """The ``model_proposals`` table: one row per ``ModelProposalRecord``."""

    __tablename__ = "model_proposals"


class PromotionRecord(SQLModel):
    """CoEvo-RSI promotion in ``round``: the pair kept (``harness_id``, ``checkpoint_id``), whether a
    challenger replaced the incumbent (``accepted``) with margin ``margin`` (δ_prom), the reason, and
    the three compared pairs with their val score and TIMR (``pairs``: incumbent, best, adapted)."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    round: int = 0
    harness_id: str = ""
    checkpoint_id: str = ""
    accepted: bool = False
    margin: float = 0.0
    reason: str = ""
    pairs: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: float = Field(default_factory=_now)


class PromotionRow(PromotionRecord, table=True):
    """The ``promotions`` table: one row per ``PromotionRecord``."""

    __tablename__ = "promotions"
