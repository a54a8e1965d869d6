"""What meta-loop nodes are given (not state): the run config and the services they call.

Nodes take ``runtime: Runtime[MetaContext]`` and reach the env, the archive, the policy, the
trainer and the meta roles only through it, so a test hands them fakes. Nothing here opens SQL:
``archive`` is ``coevo.storage.Archive``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, Sequence

from langchain_core.language_models import BaseChatModel

from coevo.config import ConfigError, RunConfig
from coevo.envs.base import Env, Task
from coevo.evaluation.engine import evaluate, evaluation_id
from coevo.evaluation.executors import Executor
from coevo.evaluation.results import EvalResult
from coevo.harnesses.agent import start_harness
from coevo.harnesses.bpe import ExperienceStore, InMemoryExperience, experience_key
from coevo.harnesses.errors import HarnessError
from coevo.harnesses.spec import HarnessSpec, load_harness
from coevo.meta.budget import (
    calls_budget,
    current_phase,
    eval_budget,
    measuring,
    stage_budget,
)
from coevo.meta.recording import Recording
from coevo.meta.roles import Curator, Editor, Inheritor, Profiler, Proposer, Summariser, Voter
from coevo.meta.sealing import carried, demonstrated
from coevo.meta.spending import Spending
from coevo.models.trajectory import Trajectory
from coevo.observe.log import loop
from coevo.observe.progress import NullReporter, Reporter
from coevo.observe.tracking import NullTracker, Tracker
from coevo.records import Checkpoint, HarnessRecord, LLMCallRecord
from coevo.storage import Archive
from coevo.strategies import get_strategy
from coevo.training.kinds import StageKind, configured, stage_rollouts

Split = Literal["train", "val", "test"]


class Trainer(Protocol):
    """The weight stage: train ``checkpoint_id`` under ``spec`` on ``tasks``; return the new
    checkpoint id and the stage's trajectories (the tokens the policy really generated)."""

    async def __call__(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int,
                       kind: StageKind | None = None) -> tuple[str, list[Trajectory]]:
        """Train ``checkpoint_id`` in ``round`` as the stage ``kind`` says (``coevo.training.kinds``:
        GRPO with its Eq. 5 rescue pool, RSFT on a WHALE weight phase, Harness-S's routed rescue, ...;
        None: the configured algorithm's plain stage); returns (new checkpoint id, the stage's
        trajectories)."""


@dataclass
class MetaContext(Recording, Spending):
    """Run-time services of a meta-loop run.

    ``policy(checkpoint_id)`` returns the chat model for that checkpoint; ``trainer`` is None for
    strategies with frozen weights; ``curator``/``editor`` are None for strategies that do not
    refine; ``proposer`` is the Meta-Harness proposer of the search strategies; ``inheritor``
    (``coevo.roles.inheritor``) is None for those without CoEvo-RSI inheritance; Harness-S's
    ``profiler`` (``coevo.roles.profiler``) and ``voter`` (the router's voters, ``coevo.roles.voter``)
    likewise, and EvoHarness-RL's ``summariser`` (``coevo.roles.summariser``; None: the offline one)
    (the strategy table, ``coevo.strategies``, says which roles a strategy needs);
    ``evaluator`` is ``coevo.evaluation.engine.evaluate`` (replaceable in tests); ``executor`` where
    its rollouts run (``coevo.evaluation.executors``; None: in this process); ``run_id`` names the run
    whose evaluations, edits and LLM calls are stored; ``tracker`` receives the loop's numbers per
    round (``coevo.observe.tracking``; ``run_meta`` opens the one ``config.report_to`` names);
    ``experience`` keeps BPE harness lineages' lessons across episodes and rounds (EvoHarness-RL;
    ``coevo.harnesses.bpe.ExperienceStore``; in memory by default, in the archive as ``make_context``
    builds it: across runs that share a start harness); a BPE harness's evaluations start every
    rollout from its lineage's lessons (the run's start harness), on the executor's workers too.
    ``h0``: the run's H0 as the driver built it (``coevo.app.preflight``; None: built here when first
    asked, ``start``), so a run builds it once.

    What the loop reads again and again is read once: a stored spec per harness id (``spec``; ids are
    content addresses, so the spec under one never changes), the run's stored H0 (``start_spec``) and
    the checkpoint a weight stage recorded (``checkpoint``).

    What ``evaluate``, ``train`` and ``store_calls`` spend is stored per phase (``account``;
    ``coevo.meta.budget``) and tracked: ``score/<split>/<harness>`` per evaluation,
    ``train/<metric>`` per weight stage (``train_step/<metric>`` per optimiser step),
    ``budget/<spend>`` cumulative; nodes add their own numbers with ``track`` (the gate's counts) and
    store what they decide with the ``record_*`` methods (``coevo.meta.recording``).
    """

    config: RunConfig
    env: Env
    archive: Archive
    policy: Callable[[str], BaseChatModel]
    trainer: Trainer | None = None
    curator: Curator | None = None
    editor: Editor | None = None
    proposer: Proposer | None = None
    inheritor: Inheritor | None = None
    profiler: Profiler | None = None
    voter: Sequence[Voter] = ()
    summariser: Summariser | None = None
    reporter: Reporter = field(default_factory=NullReporter)
    evaluator: Callable[..., Any] = evaluate
    executor: Executor | None = None
    run_id: str = "studio"
    tracker: Tracker = field(default_factory=NullTracker)
    experience: ExperienceStore = field(default_factory=InMemoryExperience)
    h0: HarnessSpec | None = None
    budget_stop: str = field(default="", init=False)
    _reserved: int = field(default=0, init=False, repr=False)
    _running: set = field(default_factory=set, init=False, repr=False)
    _answers: dict[str, str] | None = field(default=None, init=False, repr=False)
    _warned: bool = field(default=False, init=False, repr=False)
    _start: HarnessSpec | None = field(default=None, init=False, repr=False)
    _base: HarnessSpec | None = field(default=None, init=False, repr=False)
    _specs: dict[str, HarnessSpec] = field(default_factory=dict, init=False, repr=False)
    _stage: Checkpoint | None = field(default=None, init=False, repr=False)

    def tasks(self, split: Split, ids: Sequence[str] | None = None) -> list[Task]:
        """The run's tasks of ``split`` (sizes from ``config.env``), in the env's order; only those in
        ``ids`` when given."""
        n = {"train": self.config.env.n_train, "val": self.config.env.n_val, "test": self.config.env.n_test}[split]
        tasks = self.env.tasks(split, n)  # type: ignore[arg-type]
        return tasks if ids is None else [t for t in tasks if t.id in set(ids)]

    def search_tasks(self) -> list[Task]:
        """The search split a Meta-Harness search scores on (``config.search.tasks``, WHALE §5's
        D_search): that many train-split tasks after the first ``env.n_train``, disjoint from the
        weight phases' tasks; the train tasks themselves when ``search.tasks`` is 0. Raises
        ``ConfigError`` when the env's train split is too short for both."""
        n, extra = self.config.env.n_train, self.config.search.tasks
        if not extra:
            return self.tasks("train")
        tasks = self.env.tasks("train", n + extra)[n:]  # type: ignore[arg-type]
        if len(tasks) < extra:
            raise ConfigError(f"search.tasks = {extra} asks for train-split tasks after the first env.n_train = {n}, "
                              f"but env {self.env.name!r} has only {n + len(tasks)} train tasks; lower search.tasks "
                              "or env.n_train (search.tasks = 0 scores the search on the weight phases' own tasks)")
        return tasks

    @property
    def searches(self) -> bool:
        """Whether the run's strategy runs a Meta-Harness search (its row names a proposer)."""
        return "proposer" in get_strategy(self.config.strategy).roles

    def start(self) -> HarnessSpec:
        """H0 as the run's config names it (``config.harness``, else the env's base harness): ``h0`` when
        the driver built it, else built now, once (``coevo.harnesses.agent.start_harness``); ``setup``
        stores it. Raises ``HarnessError`` for a bad harness."""
        if self.h0 is None:
            self.h0 = start_harness(self.config.harness, self.env.name)
        return self.h0

    def start_spec(self) -> HarnessSpec | None:
        """The run's H0: the harness ``setup`` stored as its base (read once, through the run's harness
        links), else what it would store (``start``); None when neither is found."""
        if self._base is None:
            for record in self.archive.run_harnesses(self.run_id):
                if record.origin == "base":
                    self._base = self.spec(record.id)
                    break
        if self._base is not None:
            return self._base
        try:
            return self.start()
        except (HarnessError, OSError):
            return None

    def demonstrated(self, spec: HarnessSpec) -> list[str]:
        """The train (and, for a searching strategy, search-split) tasks whose gold answer ``spec``
        writes beyond H0 (``coevo.meta.sealing.demonstrated``): they leave later weight stages,
        checks and search scoring while ``spec`` is live. Gold answers come from the env's
        ``reveal`` (``train_answers``; never shown to a role); an env without it gives none."""
        if self._start is None:
            self._start = self.start_spec() or HarnessSpec()
        return demonstrated(spec, self.train_answers(), self._start)

    def experience_lineage(self, start_harness: str) -> str:
        """The experience key of the lineage that starts at ``start_harness`` in this run: the start
        harness and this run's env config (``coevo.harnesses.bpe.experience_key``)."""
        return experience_key(start_harness, self.config.env.model_dump(mode="json"))

    def lessons_for(self, start_harness: str, split: str, tasks: Sequence[Task]) -> list[str]:
        """The lineage's lessons a rollout of ``split`` starts with: all of them on train; on val and
        test, none that carries the gold answer of one of the evaluated ``tasks`` (``sealing.carried``;
        the answers from the env's ``reveal``, read for this check only), each left out logged."""
        lessons = self.experience.lessons(self.experience_lineage(start_harness))
        reveal = getattr(self.env, "reveal", None)
        if split == "train" or not lessons or not callable(reveal):
            return lessons
        answers = {t.id: str(reveal(t)) for t in tasks}
        kept = [x for x in lessons if not carried([x], answers)]
        if len(kept) < len(lessons):
            self.log("experience", f"{len(lessons) - len(kept)} lesson(s) left out of the {split} rollouts: they "
                                   f"hold the answer of a {split} task")
        return kept

    def train_answers(self) -> dict[str, str]:
        """The gold answer of every train (and, for a searching strategy, search-split) task by id, from
        the env's ``reveal`` (the loop's bookkeeping; never shown to a role), as text; empty for an env
        without ``reveal``. Read once."""
        if self._answers is None:
            reveal = getattr(self.env, "reveal", None)
            tasks = self.tasks("train")
            if self.searches and self.config.search.tasks:
                tasks += self.search_tasks()
            self._answers = {t.id: str(reveal(t)) for t in tasks} if callable(reveal) else {}
        return self._answers

    def spec(self, harness_id: str) -> HarnessSpec:
        """The ``HarnessSpec`` stored under ``harness_id``, read and validated once per run (the same
        object on every call: a content address's spec, not to be changed in place). Raises ``KeyError``
        when the archive lacks it."""
        if harness_id not in self._specs:
            record = self.archive.get(HarnessRecord, harness_id)
            if record is None:
                raise KeyError(f"harness {harness_id} is not in the archive; the run's database is incomplete")
            self._specs[harness_id] = load_harness(record.spec)
        return self._specs[harness_id]

    def checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """The stored record of ``checkpoint_id`` (None when the archive lacks it): the one the last
        weight stage recorded is the record ``train`` read for its metrics, so the stage's node and
        family read it without asking the archive again."""
        if self._stage is not None and self._stage.id == checkpoint_id:
            return self._stage
        return self.archive.get(Checkpoint, checkpoint_id)

    async def evaluate(self, harness_id: str, checkpoint: str, split: Split, tasks: Sequence[Task] | None = None,
                       k: int | None = None, seed: int | None = None) -> EvalResult:
        """Evaluate harness ``harness_id`` × ``checkpoint`` on ``tasks`` (default: the run's ``split``
        tasks) with the run's settings: ``k`` rollouts per task (default ``config.eval.k``; on val
        ``eval.val_k`` when set), a test evaluation shared across the archive's runs under
        ``eval.share_test`` (``coevo.evaluation.engine.evaluate``'s ``shared``), base seed
        ``seed`` (default ``config.seed``, so two harnesses are paired), the checkpoint's policy,
        ``eval.concurrency``, the reporter, stored in the archive under ``run_id`` (resumable by id),
        on the ``executor``; under a rollout cap it first reserves its declared size (``_declared``).
        Rollouts that ended by a budget before any model call are logged as a warning
        (``EvalResult.budget_note``). Val and test rollouts decode at ``eval.temperature`` when it is
        set (the papers' sampled evaluation); train-split checks and search scoring at the harness's
        own. k > 1 greedy rollouts (temperature 0) are logged once: they are k copies of one. Raises
        ``BudgetExhausted`` when the evaluation would overrun the cap."""
        extra: dict[str, Any] = {} if self.executor is None else {"executor": self.executor}
        k = k or (self.config.eval.val_k if split == "val" else None) or self.config.eval.k
        seed, spec = self.config.seed if seed is None else seed, self.spec(harness_id)
        tasks = self.tasks(split) if tasks is None else list(tasks)
        temperature = self.config.eval.temperature if split in ("val", "test") else None
        if temperature is not None:
            extra["temperature"] = temperature
        if split == "test" and self.config.eval.share_test:
            extra["shared"] = True
        if spec.bpe is not None and (start := self.start_spec()) is not None:
            extra["experience"] = self.lessons_for(start.id, split, tasks)
        if k > 1 and (spec.decoding.temperature if temperature is None else temperature) == 0 and not self._warned:
            self._warned = True
            self.log("eval", f"k = {k} rollouts per task at temperature 0 (greedy) repeat one rollout: pass@k = "
                             "avg@k; set eval.temperature > 0 for the papers' sampled evaluation")
        size = self._declared(spec, checkpoint, split, tasks, k, seed, temperature) if self.config.budget else 0
        async with self.reserved(size, f"{split} evaluation of {harness_id[:8]}, {len(tasks)} tasks x k={k}"):
            result = await self.evaluator(spec, checkpoint, self.env, split, k=k, seeds=seed,
                                          model=self.policy(checkpoint), archive=self.archive,
                                          concurrency=self.config.eval.concurrency, progress=self.reporter,
                                          run_id=self.run_id, tasks=tasks, **extra)
        if not (measuring() and self.charged(result.evaluation_id)):  # measured once, charged where it decides
            self.account(eval_budget(self.run_id, result))
        self.track({f"score/{split}/{harness_id[:12]}": result.mean_reward})
        note = result.budget_note()
        if note:  # a prompt that cannot fit its budget scores 0 having measured nothing: say so
            loop.warning(f"harness {harness_id[:12]} on {split}: {note}", extra={"topic": split})
        return result

    async def train(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int,
                    kind: StageKind | None = None) -> tuple[str, list[Trajectory]]:
        """The weight stage: ``trainer(checkpoint_id, spec, tasks, round, kind)``, its rollouts and
        policy tokens accounted (``stage_budget``), the new checkpoint's numeric metrics tracked as
        ``train/<metric>`` at ``round`` and its per-step ``history`` as ``train_step/<key>`` at step
        ``round * train.steps + i``. Nodes call this, not ``trainer``. Under a rollout cap it first
        reserves the stage's most rollouts (``stage_rollouts``: the kind's ``rollouts``; an adaptive phase cut
        to fit, ``fit``); under an updates cap it checks the stage's updates (``updates_left``) and records
        them in the new checkpoint's metrics (``updates``). Raises ``ValueError`` when the run has no
        trainer, ``BudgetExhausted`` when the stage would overrun either cap."""
        if self.trainer is None:
            raise ValueError("this strategy trains weights but the run has no trainer; use strategy harness_only or "
                             "static")
        kind = self.fit(kind if kind is not None else configured(self.config.train), round)
        updates = self.updates_left(kind, round)
        async with self.reserved(stage_rollouts(self.config.train, kind), f"round {round}'s weight stage"):
            checkpoint, trajectories = await self.trainer(checkpoint_id, spec, tasks, round, kind)
        self.account(stage_budget(self.run_id, checkpoint, trajectories))
        record = self._stage = self.archive.get(Checkpoint, checkpoint)  # read once: ``checkpoint`` keeps it
        if record is not None and "updates" not in (record.metrics or {}):
            record = self._stage = record.model_copy(update={"metrics": {**(record.metrics or {}), "updates": updates}})
            self.archive.put(record)
        metrics = record.metrics if record is not None else {}
        self.track({f"train/{k}": v for k, v in metrics.items()}, round)
        for i, step in enumerate(metrics.get("history") or []):
            self.track({f"train_step/{k}": v for k, v in step.items() if k not in ("step", "round")},
                       round * self.config.train.steps + i)
        return checkpoint, trajectories

    def _declared(self, spec: HarnessSpec, checkpoint: str, split: str, tasks: Sequence[Task], k: int,
                  seed: int, temperature: float | None = None) -> int:
        """An evaluation's declared size: ``len(tasks) x k`` rollouts, 0 on test (measurement) or when
        the same evaluation (same id, ``coevo.evaluation.engine.evaluation_id``) was charged before (``charged``)."""
        if split == "test":
            return 0
        eid = evaluation_id(self.run_id, spec.id, checkpoint, self.env.name, split, [seed + j for j in range(k)],
                            [t.id for t in tasks], temperature)
        return 0 if self.charged(eid) else len(tasks) * k

    def store_calls(self, calls: Sequence[LLMCallRecord]) -> None:
        """Store meta-role LLM calls (what a role returned) in the archive under the run's id, and
        account their tokens and cost (``calls_budget``)."""
        if calls:
            self.record(*calls)
            self.account(calls_budget(self.run_id, calls))

    def log(self, topic: str, message: str) -> None:
        """One line of the run's log on the logging channel (``coevo.observe.log``: the ``coevo.loop``
        logger, at INFO): ``topic`` the node speaking (``train``, ``gate``, ...), ``message`` the rest."""
        loop.info(message, extra={"topic": topic})

    def track(self, scalars: dict[str, Any], step: int | None = None) -> None:
        """Send ``scalars`` (tag -> number; others skipped) to the tracker at ``step`` (default: the
        current phase's round, 0 when unknown)."""
        self.tracker.log(scalars, max(0, current_phase().round if step is None else step))
