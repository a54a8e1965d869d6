"""The results of an evaluation (``coevo.evaluation.engine.evaluate``): per-task outcomes, the
aggregates stored with the evaluation, and paired outcomes of two harnesses on the same tasks and
seeds (what VACE's validation gate compares). Every score comes with its uncertainty from the same
per-task outcomes: ``outcome_estimate`` (n tasks and a 95 % interval, ``coevo.evaluation.stats``)
and ``paired_difference`` (b − a on the tasks both saw, paired bootstrap)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Mapping, Sequence

from pydantic import BaseModel, BeforeValidator, Field

from coevo.records.pairing import paired_tasks

if TYPE_CHECKING:  # stats imports SciPy (~1 s): loaded when an interval is first computed
    from coevo.evaluation.stats import Estimate

Metric = Literal["reward", "pass_at_k", "avg_at_k"]



def _mean(values: Sequence[float] | Sequence[bool]) -> float:
    """The mean of ``values`` (booleans count as 0/1); 0.0 when empty."""
    return sum(values) / len(values) if values else 0.0

class TaskOutcome(BaseModel):
    """The k rollouts of one task: ``seeds[j]``, ``rewards[j]`` in [0, 1], ``passed[j]``."""

    task_id: str
    seeds: list[int]
    rewards: list[float]
    passed: list[bool]
    trajectory_ids: list[str] = Field(default_factory=list)

    @property
    def mean_reward(self) -> float:
        """Mean reward over the k rollouts."""
        return _mean(self.rewards)

    @property
    def pass_rate(self) -> float:
        """Fraction of the k rollouts that passed."""
        return _mean(self.passed)

    def value(self, metric: Metric = "reward") -> float:
        """The task's value in [0, 1] for ``metric``: mean reward, 1.0 when any rollout passed
        (``pass_at_k``), or the pass rate (``avg_at_k``)."""
        if metric == "pass_at_k":
            return float(any(self.passed))
        return self.pass_rate if metric == "avg_at_k" else self.mean_reward


def _keyed_outcomes(value: Any) -> Any:
    """``value`` with each outcome's missing ``task_id`` taken from its key (the committed table JSON leaves it
    out, ``coevo.app.tables.results_json``); anything else unchanged, for pydantic to validate."""
    if not isinstance(value, Mapping):
        return value
    return {key: {"task_id": key, **outcome} if isinstance(outcome, Mapping) and "task_id" not in outcome else outcome
            for key, outcome in value.items()}


PerTask = Annotated[dict[str, TaskOutcome], BeforeValidator(_keyed_outcomes)]
"""Task id -> its ``TaskOutcome``; an outcome read without its ``task_id`` takes its key."""


def outcome_estimate(per_task: Mapping[str, TaskOutcome], metric: Metric = "reward") -> Estimate:
    """The score over tasks (``metric`` per task, ``TaskOutcome.value``) with n = the number of tasks
    and a 95 % interval: Wilson when every task's value is 0 or 1 (a pass rate, k = 1), else a
    percentile bootstrap over tasks (``coevo.evaluation.stats.score_estimate``). No tasks: n = 0,
    interval [0, 1]."""
    from coevo.evaluation.stats import score_estimate

    return score_estimate([o.value(metric) for o in per_task.values()])


def paired_difference(a: Mapping[str, TaskOutcome], b: Mapping[str, TaskOutcome],
                      metric: Metric = "reward") -> Estimate:
    """Mean per-task difference b − a over the tasks both evaluations hold (``a``'s order), with a
    paired-bootstrap 95 % interval over those tasks (``coevo.evaluation.stats.difference_estimate``).
    Meant for two evaluations on the same tasks and seeds (start vs final pair, incumbent vs
    candidate); ``Estimate.excludes_zero`` says whether the difference is significant at 95 %."""
    from coevo.evaluation.stats import difference_estimate

    common = paired_tasks(a, b)
    return difference_estimate([a[t].value(metric) for t in common], [b[t].value(metric) for t in common])


class EvalResult(BaseModel):
    """What ``evaluate`` returns and stores as the evaluation's aggregates.

    Rates are in [0, 1]; ``latency_s`` is the mean wall time per rollout, ``wall_s`` the whole
    evaluation's; ``trivial_baseline`` the env's best trivial-policy mean reward on the split (None
    when the env has no ``trivial_baseline``); ``resumed_tasks`` tasks reused from the archive;
    ``reward_mode`` what the rewards are: ``correct`` (1/0 on the checker's pass) or ``partial``
    (its partial credit), ``""`` for an env that does not say (``Env``); ``reply_transforms`` what
    the harness did to every reply before scoring (``coevo.evaluation.parity``; empty: scored as
    written) and then ``suite_reward``, the suite's own mean reward on the raw final replies (None:
    no transformation, or the suite cannot score a reply alone); ``unanswered`` the rollouts that
    ended by a budget before any model call (``budget_note``); ``temperature`` the decoding
    temperature the rollouts used when the evaluation set one (None: the harness's own).
    """

    evaluation_id: str
    harness_id: str
    checkpoint_id: str
    env: str
    split: str
    k: int
    seeds: list[int]
    n_tasks: int
    n_rollouts: int
    pass_at_k: float
    avg_at_k: float
    mean_reward: float
    timr: float
    interface_violations: int
    model_turns: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    wall_s: float
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    trivial_baseline: float | None = None
    trivial_detail: dict[str, Any] = Field(default_factory=dict)
    resumed_tasks: int = 0
    reward_mode: str = ""
    reply_transforms: list[str] = Field(default_factory=list)
    suite_reward: float | None = None
    unanswered: int = 0
    temperature: float | None = None
    per_task: PerTask = Field(default_factory=dict)

    @property
    def estimate(self) -> Estimate:
        """The mean reward with n tasks and its 95 % interval (``outcome_estimate`` of ``per_task``)."""
        return outcome_estimate(self.per_task)

    def budget_note(self) -> str | None:
        """What to say when rollouts ended by a budget before the model was ever called (``unanswered``;
        the harness's prompt did not fit its context budget, ``coevo.harnesses.fit``): those scores
        measure nothing. None when every rollout made a model call."""
        if not self.unanswered:
            return None
        which = (f"every rollout ({self.unanswered})" if self.unanswered == self.n_rollouts
                 else f"{self.unanswered} of {self.n_rollouts} rollouts")
        return (f"{which} ended by a budget before any model call (stop reasons "
                + ", ".join(f"{r} {n}" for r, n in sorted(self.stop_reasons.items()))
                + "): their rewards measure nothing. The harness's prompt does not fit its context budget: "
                "see `coevo harness validate`")
