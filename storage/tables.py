"""The archive's tables (DESIGN.md, Storage), declared once.

Each ``*Record`` is a plain SQLModel (pydantic) model: it is what ``Archive`` methods accept and
return. Each ``*Row`` subclass with ``table=True`` is its SQL table. JSON fields use the SQL JSON
type (TEXT on SQLite). There are no foreign-key constraints: rows reference each other by id
(the loop writes a trajectory before its evaluation is final, an edit before its child harness
is checked) and integrity is kept by writing each batch in one transaction.

Trajectories keep every ``coevo.models.trajectory.Trajectory`` field: the scalars as columns, the
whole trajectory (calls with their token ids and logprobs) as compact JSON in ``body``
(``coevo.storage.codec``), plus the ids of the evaluation and run that produced them.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import JSON, Text
from sqlmodel import Field, SQLModel

SCHEMA_VERSION = 1
"""Bump when a table changes; ``Archive`` refuses a database written by a newer version."""


def _now() -> float:
    return time.time()


class SchemaVersionRow(SQLModel, table=True):
    """One row: the schema version that created the database."""

    __tablename__ = "schema_version"
    id: int = Field(default=1, primary_key=True)
    version: int


class RunRecord(SQLModel):
    """One invocation of the loop or of ``coevo eval``: ``strategy`` (e.g. ``vace``, ``eval``),
    its full ``config``, ``status`` (``running``/``done``/``failed``), Unix timestamps."""

    id: str = Field(primary_key=True)
    strategy: str = ""
    config: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    status: str = "running"
    created_at: float = Field(default_factory=_now)
    updated_at: float = Field(default_factory=_now)


class RunRow(RunRecord, table=True):
    __tablename__ = "runs"


class HarnessRecord(SQLModel):
    """A harness spec: ``id`` = its sha256 spec id, ``spec`` its canonical JSON as a dict,
    ``parents`` the parent spec ids, ``origin`` how it was made (``base``, ``edit``, ``file``...)."""

    id: str = Field(primary_key=True)
    spec: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    parents: list[str] = Field(default_factory=list, sa_type=JSON)
    origin: str = ""
    run_id: str | None = Field(default=None, index=True)
    created_at: float = Field(default_factory=_now)


class HarnessRow(HarnessRecord, table=True):
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
    created_at: float = Field(default_factory=_now)


class EditRow(EditRecord, table=True):
    __tablename__ = "edits"


class CheckpointRecord(SQLModel):
    """Policy weights: a ``base_model`` reference plus an optional LoRA ``adapter_path``,
    ``parents`` (checkpoint ids), the training ``config`` and its ``metrics``."""

    id: str = Field(primary_key=True)
    base_model: str = ""
    adapter_path: str | None = None
    parents: list[str] = Field(default_factory=list, sa_type=JSON)
    config: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    metrics: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    run_id: str | None = Field(default=None, index=True)
    created_at: float = Field(default_factory=_now)


class CheckpointRow(CheckpointRecord, table=True):
    __tablename__ = "policy_checkpoints"  # "checkpoints" is LangGraph's checkpointer table in the same DB


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
    created_at: float = Field(default_factory=_now)


class EvaluationRow(EvaluationRecord, table=True):
    __tablename__ = "evaluations"


class TrajectoryRow(SQLModel, table=True):
    """A ``Trajectory``: its scalar fields as columns (for queries), the whole trajectory in
    ``body`` (``coevo.storage.codec`` JSON: messages, calls with token ids and logprobs, hook
    events, score detail), plus ``evaluation_id``/``run_id`` and token/cost totals."""

    __tablename__ = "trajectories"
    id: str = Field(primary_key=True)
    evaluation_id: str | None = Field(default=None, index=True)
    run_id: str | None = Field(default=None, index=True)
    task_id: str = Field(index=True)
    env: str = ""
    split: str = ""
    harness_id: str = Field(default="", index=True)
    checkpoint_id: str = ""
    seed: int = 0
    final_answer: str | None = None
    stop_reason: str = ""
    interface_violations: int = 0
    model_turns: int = 0
    env_actions: int = 0
    reward: float = 0.0
    passed: bool = False
    latency_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    body: str = Field(sa_type=Text)
    created_at: float = Field(default_factory=_now)


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
    created_at: float = Field(default_factory=_now)


class GateDecisionRow(GateDecisionRecord, table=True):
    __tablename__ = "gate_decisions"


class ProfileRecord(SQLModel):
    """A capability profile of a harness (Harness-S): e.g. success per task category on train."""

    id: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    round: int = 0
    harness_id: str = Field(default="", index=True)
    checkpoint_id: str = ""
    profile: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: float = Field(default_factory=_now)


class ProfileRow(ProfileRecord, table=True):
    __tablename__ = "profiles"


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
    created_at: float = Field(default_factory=_now)


class LLMCallRow(LLMCallRecord, table=True):
    __tablename__ = "llm_calls"
