"""The records of one run's bookkeeping: the run itself, its harnesses (and its links to those another
run stored first), edits, evaluations, meta-role LLM calls and budget rows (docs/design.md, Storage).
Plain pydantic models: ``coevo.storage`` derives a table from each (``storage/README.md``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from coevo.masking import redact_data
from coevo.records.fields import created
from coevo.timestamps import UTCTime


class RunRecord(BaseModel):
    """One invocation of the loop or of ``coevo eval``: ``strategy`` (e.g. ``vace``, ``eval``),
    its full ``config``, ``status`` (``running``/``done``/``failed``/``paused``/``interrupted``),
    UTC-aware timestamps."""

    id: str
    strategy: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    status: str = "running"
    created_at: UTCTime = created()
    updated_at: UTCTime = created()

    @field_validator("config")
    @classmethod
    def _no_secrets(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The config with every secret masked (``coevo.masking``): a database password or API key is
        never stored, and one stored by an older coevo is never read back."""
        return redact_data(config)


class RunHeartbeat(BaseModel):
    """The process running run ``id`` (a meta-loop run or a ``coevo eval``): its ``host`` and ``pid``,
    and ``at`` the last time it said it was alive (UTC; rewritten every few seconds while it runs,
    ``coevo.app.heartbeat``), so a run left ``running`` by a killed process can be told from a live
    one (``coevo archive list/show``). A record of its own, not fields of ``RunRecord``, so a beat
    never rewrites the run's row or its ``updated_at``."""

    id: str
    host: str = ""
    pid: int = 0
    at: UTCTime = created()


class HarnessRecord(BaseModel):
    """A harness spec as archived: ``id`` = its sha256 spec id, ``spec`` its canonical JSON as a dict
    (``coevo.harnesses.load_harness`` reads it), ``parents`` the parent spec ids, ``origin`` how it was
    made (``base``, ``edit``, ``sampling``, ``file``...)."""

    id: str
    spec: dict[str, Any] = Field(default_factory=dict)
    parents: list[str] = Field(default_factory=list)
    origin: str = ""
    run_id: str | None = None
    created_at: UTCTime = created()

    @classmethod
    def of(cls, spec: Any, parents: list[str] | None = None, origin: str = "",
           run_id: str | None = None) -> HarnessRecord:
        """The record of ``spec`` (a ``HarnessSpec``: its ``id`` and ``model_dump(mode="json")``);
        ``parents`` default to the spec's own ``parents`` field when it has one. Raises ``TypeError``
        for anything without an ``id`` and ``model_dump``."""
        if not hasattr(spec, "id") or not hasattr(spec, "model_dump"):
            raise TypeError(f"a harness record needs a HarnessSpec, got {type(spec).__name__}")
        return cls(id=spec.id, spec=spec.model_dump(mode="json"), origin=origin, run_id=run_id,
                   parents=list(parents if parents is not None else getattr(spec, "parents", None) or []))


class RunHarness(BaseModel):
    """Run ``run_id`` stored or reused harness ``harness_id`` (``Archive.add_harness``): the link through
    which a run reads its harnesses (``Archive.run_harnesses``). A harness row is content-addressed and
    owned by the first run to store it, so a second run that starts from the same H0, or reaches the
    same edit's child, has only this link; ``origin`` and ``parents`` are what this run said when it
    first stored the spec (they may differ from the owner's). ``id`` is ``"<run_id>/<harness_id>"``."""

    id: str
    run_id: str
    harness_id: str
    origin: str = ""
    parents: list[str] = Field(default_factory=list)
    created_at: UTCTime = created()

    @classmethod
    def of(cls, record: HarnessRecord) -> RunHarness:
        """The link of ``record`` (a ``HarnessRecord`` as a run stores it: its ``run_id`` set) to its run.
        Raises ``ValueError`` for a record without a run."""
        if record.run_id is None:
            raise ValueError(f"harness {record.id[:12]} has no run to link it to")
        return cls(id=f"{record.run_id}/{record.id}", run_id=record.run_id, harness_id=record.id,
                   origin=record.origin, parents=list(record.parents))


class EditRecord(BaseModel):
    """An RFC 6902 ``patch`` proposed by an editor on ``parent_id`` giving ``child_id``, with its
    ``rationale``, the repair ``direction`` it targets, and its fate: ``status``
    (``proposed``/``rejected``/``checked``...) and ``reason``. One per revision of a candidate."""

    id: str
    run_id: str | None = None
    round: int = 0
    parent_id: str = ""
    child_id: str | None = None
    patch: list[dict[str, Any]] = Field(default_factory=list)
    rationale: str = ""
    direction: str = ""
    status: str = "proposed"
    reason: str = ""
    created_at: UTCTime = created()


class EvaluationRecord(BaseModel):
    """One evaluation: harness × checkpoint × env × split × ``seeds`` (one seed per rollout index,
    ``k`` rollouts per task). ``aggregates`` holds the ``EvalResult`` numbers; ``status`` is
    ``running`` until they are written, then ``done``."""

    id: str
    run_id: str | None = None
    harness_id: str = ""
    checkpoint_id: str = ""
    env: str = ""
    split: str = ""
    seeds: list[int] = Field(default_factory=list)
    k: int = 1
    task_ids: list[str] = Field(default_factory=list)
    aggregates: dict[str, Any] = Field(default_factory=dict)
    status: str = "running"
    created_at: UTCTime = created()


class LLMCallRecord(BaseModel):
    """One meta-role LLM call (curator, editor, voter, profiler...): tokens, cost (USD), latency (s)."""

    id: str
    run_id: str | None = None
    role: str = ""
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    request: dict[str, Any] = Field(default_factory=dict)
    response: dict[str, Any] = Field(default_factory=dict)
    created_at: UTCTime = created()


class BudgetRecord(BaseModel):
    """What one phase of a run spent (WHALE §6 and VACE compare strategies at equal rollout budgets):
    ``round`` and ``phase`` (the meta-graph node that spent it: ``train``, ``stage_effect``, ``check``,
    ``validate``, ``final_test``, ...) identify the phase; ``split`` the task split its rollouts ran
    on (``""`` for meta-LLM calls); ``rollouts`` episodes run, ``policy_input_tokens`` /
    ``policy_output_tokens`` the policy model's prompt / sampled tokens over them and
    ``policy_cost_usd`` its cost (USD; 0 for a local model), ``meta_calls`` /
    ``meta_input_tokens`` / ``meta_output_tokens`` / ``meta_cost_usd`` (USD) the meta roles' LLM calls.
    ``id`` names what was paid for (an evaluation, a weight stage, a batch of LLM calls), so work
    reused by a later phase or a resume is counted once (``coevo.meta.budget``)."""

    id: str
    run_id: str | None = None
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
    created_at: UTCTime = created()
