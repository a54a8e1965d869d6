"""Typed state of the meta-loop graphs and the domain models that travel in it.

``MetaState`` is the core loop state every strategy shares (VACE Algorithm 1's incumbent, round,
checkpoint, trajectories, candidates, validation and decisions); ``SearchState`` extends it with a
Meta-Harness search's phases (shared by WHALE and PACE); each paper family extends one of them with
the keys only it uses (``coevo.graphs.<family>.state``). Fields are either *replaced* by the node
that writes them (round, incumbent, checkpoint, train trajectories, weight stage, directions,
checked candidates, validation, test) or *accumulated* across the run with a reducer (decisions,
history: ``operator.add``; the sealed harnesses: ``seal``). ``candidates`` collects the parallel
``edit`` branches of one round (fan-in, reducer ``collect``) and is cleared by ``curate`` at the
start of each refinement. Every value is a pydantic model or a plain scalar/id, so LangGraph's
checkpointer serialises the state and a resumed run gets the same models back (``state_models``
lists them for the serialiser's allow-list). The persisted ones (``GateDecision``, ``GatePair``) are
``coevo.records``' (re-exported here).
"""

from __future__ import annotations

import operator
import typing
from typing import TYPE_CHECKING, Annotated, Any, Iterable, Literal

from pydantic import BaseModel, Field
from typing_extensions import NotRequired, TypedDict  # pydantic (Studio's state schemas) needs it on Python < 3.12

from coevo.evaluation.results import EvalResult, PerTask, outcome_estimate
from coevo.meta.sealing import Sealed, seal
from coevo.records import GateDecision

if TYPE_CHECKING:
    from coevo.evaluation.stats import Estimate

RESET = "__reset__"


def union(current: list[str] | None, update: list[str]) -> list[str]:
    """Reducer for ``demo_tasks``: the ids of both lists, each once, first appearance first."""
    return list(dict.fromkeys(list(current or []) + list(update)))


def collect(current: list[Candidate] | None, update: list[Candidate] | str) -> list[Candidate]:
    """Reducer for ``candidates``: append branch results; the string ``RESET`` empties the list."""
    if update == RESET:
        return []
    return list(current or []) + list(update)


class Evidence(BaseModel):
    """One failed *train* trajectory as a meta role sees it: the answer it gave (``answer``, cut to
    300 characters), its last reply, why it stopped, and the verifier's scoring ``diagnostics``
    without the gold answer (``coevo.envs.redact``: what the agent answered, the checker's error
    type and other public diagnostics; no split's expected answer reaches a role here)."""

    task_id: str
    answer: str = ""
    last_reply: str = ""
    stop_reason: str = ""
    diagnostics: dict[str, Any] = Field(default_factory=dict)


class Direction(BaseModel):
    """A repair direction (Harness-S §3.2): one root cause supported by ≥ 2 failed train tasks,
    with the evidence (task ids and trajectory excerpts; train data only)."""

    id: str
    cause: str
    description: str
    task_ids: list[str]
    evidence: list[Evidence] = Field(default_factory=list)


class CandidateChecks(BaseModel):
    """The numbers ``check`` measured on a candidate (None: that check did not run).

    Smoke run: TIMR (violations per model turn) of incumbent and candidate on the first
    ``meta.smoke_tasks`` train tasks. Local check: mean reward of both on ``local_tasks`` train tasks.
    ``warnings``: what the candidate's spec holds that is valid but works against its use
    (``coevo.harnesses.spec.harness_warnings``: a fixed decoding seed), one line each.
    """

    smoke_timr_incumbent: float | None = None
    smoke_timr_candidate: float | None = None
    local_tasks: int | None = None
    local_incumbent: float | None = None
    local_candidate: float | None = None
    warnings: list[str] = Field(default_factory=list)


class Candidate(BaseModel):
    """An edit of the incumbent proposed for a direction.

    ``status``: ``proposed`` → ``checked`` | ``rejected``; ``reason`` says why a candidate was
    rejected (malformed LLM reply, invalid patch, failed static or local check). ``spec_id`` is
    the child spec's id once the patch applied; ``patch`` is the RFC 6902 operation list.
    ``demo_tasks``: the train tasks whose answers the child spec carries — what the role declared
    plus what ``realise`` finds by comparing every train task's gold answer with the spec
    (``MetaContext.demonstrated``): docs/design.md, Principles, keeps them out of later weight stages,
    checks and search scoring while the candidate is pending or accepted.
    """

    id: str
    direction: str
    parent_id: str
    patch: list[dict[str, Any]] = Field(default_factory=list)
    rationale: str = ""
    spec_id: str | None = None
    status: Literal["proposed", "checked", "rejected"] = "proposed"
    reason: str = ""
    revision: int = 0
    checks: CandidateChecks = Field(default_factory=CandidateChecks)
    demo_tasks: list[str] = Field(default_factory=list)


class EvalSummary(BaseModel):
    """The numbers the gate, the round summary and the report need from one evaluation
    (``EvalResult``) of a harness × checkpoint on a split: ``score`` is the mean reward in [0, 1],
    ``timr`` interface violations per model turn, ``per_task`` the k outcomes of each task."""

    harness_id: str
    checkpoint_id: str
    split: str
    evaluation_id: str
    score: float
    pass_at_k: float
    avg_at_k: float
    timr: float
    trivial_baseline: float | None = None
    per_task: PerTask = Field(default_factory=dict)

    @property
    def estimate(self) -> Estimate:
        """``score`` (mean@k) with n tasks and its 95 % interval, from ``per_task`` (the same
        ``outcome_estimate`` as ``EvalResult.estimate``)."""
        return outcome_estimate(self.per_task)

    @property
    def pass_estimate(self) -> Estimate:
        """pass@k (a task counts when any of its k rollouts passed) with n tasks and its 95 % interval."""
        return outcome_estimate(self.per_task, "pass_at_k")

    @property
    def k(self) -> int:
        """Rollouts per task (1 when there are no tasks)."""
        return max((len(o.seeds) for o in self.per_task.values()), default=1)

    @classmethod
    def of(cls, result: EvalResult) -> EvalSummary:
        """The summary of an ``EvalResult``."""
        return cls(harness_id=result.harness_id, checkpoint_id=result.checkpoint_id, split=result.split,
                   evaluation_id=result.evaluation_id, score=result.mean_reward, pass_at_k=result.pass_at_k,
                   avg_at_k=result.avg_at_k, timr=result.timr, trivial_baseline=result.trivial_baseline,
                   per_task=result.per_task)


class CandidateOutcome(BaseModel):
    """One candidate in a round summary: its child spec id, val score (None when not validated) and
    ``fate``: ``accepted`` (gate), ``adopted`` (no gate), ``rejected (check)``, ``rejected (gate)``
    or ``not adopted``."""

    id: str | None
    status: str
    reason: str = ""
    val: float | None = None
    fate: str


class WeightStage(BaseModel):
    """The weight stage of round t and its own effect (VACE Alg. 1, line 2, measured alone): the
    incumbent H[t] on val under W[t] (``before``) and under W[t+1] (``after``), same tasks and seeds,
    so ``after.score - before.score`` is what the stage changed with the harness held fixed.

    Training numbers come from the new checkpoint's metrics (``coevo.training.grpo.stage.stage_metrics``):
    ``train_reward`` the mean reward of the rollouts sampled under H[t] at the training temperature,
    ``effective_group_rate`` the fraction of retained groups with both a success and a failure
    (Harness-S §3), ``contrast_rate`` that of retained groups whose rewards differ (with partial
    credit a group can have contrast and no success), ``rescue_rate`` the fraction of groups Eq. 5
    replaced (Harness-S: the rescue trigger rate), ``rescue_success`` the fraction of rescued groups
    with >= 1 success, ``resampled_groups`` the groups dynamic sampling drew in place of groups without
    contrast, ``delta_norm`` the size of the stage's own LoRA change and ``total_delta_norm`` that of
    W[t+1] from the base model
    (``coevo.training.delta``: sum over layers of ``||s B A||_F``). ``None``: not measured.
    """

    round: int
    harness_id: str
    checkpoint_before: str
    checkpoint_after: str
    steps: int | None = None
    train_reward: float | None = None
    effective_group_rate: float | None = None
    contrast_rate: float | None = None
    rescue_rate: float | None = None
    rescue_success: float | None = None
    resampled_groups: int | None = None
    delta_norm: float | None = None
    total_delta_norm: float | None = None
    excluded_tasks: int = 0
    before: EvalSummary | None = None
    after: EvalSummary | None = None

    @property
    def val_before(self) -> float | None:
        """val score of H[t] under W[t]."""
        return self.before.score if self.before else None

    @property
    def val_after(self) -> float | None:
        """val score of H[t] under W[t+1]."""
        return self.after.score if self.after else None


class RoundSummary(BaseModel):
    """The end of round t: the incumbent H[t+1] and checkpoint W[t+1], the incumbent's val score,
    the trivial-policy baseline on val, every candidate's fate, and the round's weight stage (None
    for strategies with frozen weights)."""

    round: int
    incumbent: str
    checkpoint: str
    incumbent_val: float | None = None
    trivial: float | None = None
    candidates: list[CandidateOutcome] = Field(default_factory=list)
    weights: WeightStage | None = None


class EditRequest(TypedDict):
    """What ``fan_out`` sends each ``edit`` branch (a LangGraph ``Send`` payload): one direction,
    the incumbent it edits, the round, the round's train trajectory ids, and which candidate of the
    direction this branch asks for (``sample``: 0, 1, ...; absent means 0)."""

    direction: Direction
    incumbent: str
    round: int
    train_trajectories: list[str]
    sample: NotRequired[int]


class MetaState(TypedDict, total=False):
    """State of one meta-loop run (VACE Algorithm 1)."""

    run_id: str
    """Replaced once by ``setup``: the run id (``MetaContext.run_id``)."""
    round: int
    """Replaced: the round being run, 0-based (``setup`` sets 0, ``next_round`` advances it)."""
    incumbent: str
    """Replaced: the incumbent harness id H[t] (``setup``, then ``gate``/``adopt``)."""
    start_harness: str
    """Replaced once by ``setup``: H0's id."""
    start_checkpoint: str
    """Replaced once by ``setup``: W0's id."""
    checkpoint: str
    """Replaced: the current checkpoint id W[t] (W[t+1] after ``train``)."""
    train_trajectories: list[str]
    """Replaced each round: ids of the trajectories T[t] the weight stage (or ``sample``) produced."""
    stage: WeightStage
    """Replaced each round by ``train`` (training numbers), completed by ``stage_effect`` (val before/after)."""
    sealed: Annotated[dict[str, Sealed], seal]
    """Merged (``coevo.meta.sealing.seal``; a value None removes a harness): each live harness —
    pending (``edit``, ``propose``), accepted or pooled — with the train tasks whose answers its spec
    carries (``MetaContext.demonstrated``). Weight stages, ``sample``, checks and search scoring leave
    every such task out (``sealed_tasks``); a rejected harness is removed, so its tasks return."""
    demo_tasks: Annotated[list[str], union]
    """Accumulated (``union``): what ``sealed`` replaced, read for runs checkpointed before it (no node
    writes it now)."""
    directions: list[Direction]
    """Replaced each round by ``curate``."""
    candidates: Annotated[list[Candidate], collect]
    """Accumulated within a round by ``collect``: the fan-in of the ``edit`` branches; ``curate`` resets it."""
    checked: list[Candidate]
    """Replaced each round by ``check``: the candidates with status ``checked`` or ``rejected``."""
    validation: dict[str, EvalSummary]
    """Replaced each round by ``validate``: the val evaluation of each harness id (incumbent and checked candidates)."""
    decisions: Annotated[list[GateDecision], operator.add]
    """Accumulated (``operator.add``): every gate decision of the run."""
    history: Annotated[list[RoundSummary], operator.add]
    """Accumulated (``operator.add``): one summary per round, appended by ``next_round``."""
    test: dict[str, EvalSummary]
    """Replaced by ``final_test``: the test evaluation of ``"start"`` (H0, W0) and ``"final"`` (H[T], W[T]);
    Harness-S's ``routed_test`` adds ``"rank1"``, ``"rank2"``, ... (the final checkpoint under each router rank)."""
    rounds: int
    """Replaced once by ``setup`` (``config.rounds``): the rounds the loop runs; an alternating
    strategy's plan node replaces it by its plan's cycles."""
    budget_stop: str
    """Replaced once, under a rollout cap (``config.budget``), by the node whose spending call would
    have overrun it: why the run ended there (``coevo.meta.budget``); absent while the run is within it."""
    final_val: EvalSummary
    """Replaced by the final test of a budgeted run: the final pair's val evaluation, measured at the
    budget (outside the cap; reused when the run had validated that pair)."""


def state_models(schemas: Iterable[Any]) -> tuple[type[BaseModel], ...]:
    """Every pydantic model reachable from the state ``schemas`` (TypedDicts: their fields, and
    list/dict/``Annotated``/union arguments, recursively through model fields): the checkpointer's
    deserialisation allow-list for a graph with those schemas (``StateGraph.schemas``)."""
    seen: dict[type[BaseModel], None] = {}

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp not in seen:
                seen[tp] = None
                for field in tp.model_fields.values():
                    visit(field.annotation)
            return
        for arg in typing.get_args(tp):
            visit(arg)

    for schema in schemas:
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            visit(schema)
        elif isinstance(schema, type):
            for tp in typing.get_type_hints(schema, include_extras=True).values():
                visit(tp)
    return tuple(seen)
