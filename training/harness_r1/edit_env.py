"""Harness-R1's edit environment: an episode is a batch of the target's failed *train* trajectories
under the current harness and frozen weights; the engineer's action is a JSON Patch of that harness;
the reward is the success the patch buys on a fresh rerun of the same batch.

Harness-R1 ("Learning to Edit Executable Runtime Harnesses from Agent Failure Trajectories",
arXiv:2608.02276, its abstract): "a separate engineer
converts batches of target-agent failures into validated executable patches; fresh same-batch
reruns of the frozen target provide outcome rewards, so training updates only the engineer". Here:

    r(patch) = mean success of rerun(H + patch, batch, seed) - mean success of rerun(H, batch, seed)

both reruns on the episode's tasks with the same *fresh* seed (``EditEpisode.seed``: not the seed
of the failures, so the batch is not simply replayed), the unpatched rerun being the noise control
(a batch of failures regresses towards the mean on any rerun; the control takes that out). The
control is run once per episode and seed and shared by every patch of a GRPO group. A reply that
does not parse as ``{"rationale", "patch"}``, whose patch does not apply, yields an invalid spec
(``apply_edit``: registry, tool and schema checks) or changes nothing (``NOOP``) gets ``penalty`` (stated:
``EditEnv.penalty``, -1.0 by default, the worst a valid patch can score) and no rerun.

Train tasks only: ``EditEpisode`` raises ``SplitLeakError`` for a val/test task or trajectory, so no
sealed task reaches the engineer's prompt or its reward.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import statistics
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

from pydantic import BaseModel, Field, ValidationError

from coevo.envs.base import Task
from coevo.envs.redact import redact_detail
from coevo.harnesses.errors import HarnessError
from coevo.harnesses.patch import apply_edit
from coevo.harnesses.registry import ACTIONS, CONDITIONS, EVENTS
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import Trajectory

Rerun = Callable[[HarnessSpec, Sequence[Task], int], "Sequence[float] | Awaitable[Sequence[float]]"]
"""``rerun(spec, tasks, seed) -> success per task`` (in [0, 1], task order): the frozen target under
``spec`` on ``tasks`` with rollout seed ``seed`` (``evaluation_rerun`` builds the real one)."""

PENALTY = -1.0
"""The default reward of an invalid patch: the lowest a valid one can get (all passed -> all failed)."""


class SplitLeakError(ValueError):
    """A val/test task or trajectory was about to reach the harness engineer."""


class EditReply(BaseModel):
    """An engineer's (and an LLM editor's) reply: an RFC 6902 patch of the harness and why it should help."""

    rationale: str
    patch: list[dict[str, Any]] = Field(min_length=1)


def failure_excerpt(t: Trajectory, chars: int = 300) -> dict[str, Any]:
    """What a meta role may read of a *train* trajectory: task id, its answer and last reply (cut to
    ``chars``), why it stopped, and its scoring diagnostics redacted (``redact_detail``: no gold
    answer; a JSON-safe copy). The fields of ``coevo.meta.state.Evidence``."""
    replies = [m for m in t.messages if m.get("type") == "ai"]
    last = str(replies[-1]["data"].get("content", ""))[:chars] if replies else ""
    return {"task_id": t.task_id, "answer": (t.final_answer or "")[:chars], "last_reply": last,
            "stop_reason": t.stop_reason,
            "diagnostics": json.loads(json.dumps(redact_detail(t.split, t.score_detail or {}), default=str))}


def train_only(tasks: Sequence[Task], what: str = "the harness engineer") -> list[Task]:
    """``tasks`` unchanged when every one is a train task. Raises ``SplitLeakError`` naming the first
    val/test task (docs/design.md, Principles: editors see train trajectories only)."""
    for t in tasks:
        if t.split != "train":
            raise SplitLeakError(f"task {t.id!r} is a {t.split} task but {what} may see train tasks only; build its "
                                 "episodes from the train split (MetaContext.tasks('train'))")
    return list(tasks)


@dataclass
class EditEpisode:
    """One Harness-R1 episode: ``spec`` (the current harness), ``tasks`` (the batch: train tasks
    whose rollouts under ``spec`` failed), ``evidence`` (one ``failure_excerpt`` per failure, in the
    prompt), ``seed`` (the rerun seed: fresh, i.e. not the failures' own) and ``id``. Raises
    ``SplitLeakError`` when a task or an evidence trajectory is not from the train split."""

    id: str
    spec: HarnessSpec
    tasks: list[Task]
    evidence: list[dict[str, Any]] = field(default_factory=list)
    seed: int = 1

    def __post_init__(self) -> None:
        train_only(self.tasks, f"episode {self.id}")
        ids = {t.id for t in self.tasks}
        stray = [e.get("task_id") for e in self.evidence if e.get("task_id") not in ids]
        if stray:
            raise SplitLeakError(f"episode {self.id}: evidence of tasks {stray} outside its train batch")

    @classmethod
    def of_failures(cls, id: str, spec: HarnessSpec, failures: Sequence[Trajectory], tasks: dict[str, Task],
                    seed: int) -> EditEpisode:
        """The episode of ``failures`` (trajectories under ``spec``; passed ones are skipped) over the
        train ``tasks`` by id. Raises ``SplitLeakError`` for a non-train trajectory and ``KeyError``
        for a trajectory whose task is not in ``tasks``."""
        failed = [t for t in failures if not t.passed]
        bad = [t.task_id for t in failed if t.split != "train"]
        if bad:
            raise SplitLeakError(f"episode {id}: trajectories of {bad} are not train rollouts")
        batch = list(dict.fromkeys(t.task_id for t in failed))
        return cls(id, spec, [tasks[i] for i in batch], [failure_excerpt(t) for t in failed], seed)


def edit_system(goal: str) -> str:
    """The system prompt of a harness edit: ``goal`` (who edits what, for what), then how: RFC 6902
    operations, the spec's components, the registries a hook may name, the reply's JSON shape."""
    return (f"{goal}, with RFC 6902 JSON Patch operations. Components: prompt (slots + rules), skills, context, "
            f"memory, hooks, tool_view, parser, budget, decoding. Hook events: {list(EVENTS)}; conditions: "
            f"{sorted(CONDITIONS)}; actions: {sorted(ACTIONS)}. Reply with JSON "
            "{\"rationale\": str, \"patch\": [ops]}.")


def engineer_messages(spec: HarnessSpec, evidence: Sequence[dict[str, Any]], tasks: Sequence[Task] = (),
                      focus: str = "") -> tuple[str, str]:
    """The engineer's (system, user) prompt: the harness JSON, the registries an edit may name, and
    the failures (each task's prompt, cut to 300 characters, when ``tasks`` are given; the
    ``evidence``); ``focus``: an optional line on what the failures share (a curator's direction).
    The same text serves cold-start SFT, GRPO and use as an editor, so the policy is trained on the
    prompt it is used with."""
    system = edit_system("You are a harness engineer: you edit an agent harness spec (JSON) so that the agent "
                         "stops failing the tasks shown")
    prompts = {t.id: str(t.prompt)[:300] for t in tasks}
    failures = [{**({"task": prompts[e["task_id"]]} if e.get("task_id") in prompts else {}), **e} for e in evidence]
    user = (f"Harness:\n{spec.model_dump_json(indent=1)}\n\n"
            + (f"What the failures share: {focus}\n\n" if focus else "")
            + f"Failed train episodes:\n{json.dumps(failures, indent=1, default=str)}")
    return system, user


@dataclass
class EditOutcome:
    """The reward of one reply: ``reward`` (patched - unpatched, or the penalty), ``valid``, the
    ``reason`` an invalid reply was rejected, the two reruns' mean successes (None when not run),
    the child spec (None when invalid) and its ``patch``."""

    reward: float
    valid: bool
    reason: str = ""
    patched: float | None = None
    unpatched: float | None = None
    child: HarnessSpec | None = None
    patch: list[dict[str, Any]] = field(default_factory=list)


class EditEnv:
    """The edit environment (module doc). ``rerun`` the frozen target (``Rerun``); ``penalty`` the
    reward of an invalid reply; ``tools`` the target env's tool names (a patch's tool view is checked
    against them; None: not checked). Controls are cached by (episode id, seed); ``outcomes`` keeps
    every outcome in the order they finished. Use from one thread at a time."""

    def __init__(self, rerun: Rerun, penalty: float = PENALTY, tools: Sequence[str] | None = None) -> None:
        self.rerun, self.penalty, self.tools = rerun, penalty, None if tools is None else list(tools)
        self.controls: dict[tuple[str, int], asyncio.Future] = {}
        self.outcomes: list[EditOutcome] = []

    async def _run(self, spec: HarnessSpec, tasks: Sequence[Task], seed: int) -> float:
        out = self.rerun(spec, train_only(tasks, "a rerun"), seed)
        values = list(await out) if inspect.isawaitable(out) else list(out)
        if len(values) != len(tasks):
            raise ValueError(f"rerun returned {len(values)} successes for {len(tasks)} tasks")
        return statistics.fmean(values) if values else 0.0

    async def control(self, episode: EditEpisode) -> float:
        """Mean success of the unpatched rerun of ``episode``: run once per episode and seed and
        shared by the replies in flight (a GRPO step runs in its own event loop; a finished control
        is reused by later steps, a failed one is run again)."""
        key = (episode.id, episode.seed)
        task = self.controls.get(key)
        if task is not None and task.done() and task.exception() is None:
            return task.result()
        loop = asyncio.get_running_loop()
        if task is None or task.done() or task.get_loop() is not loop:
            task = self.controls[key] = loop.create_task(self._run(episode.spec, episode.tasks, episode.seed))
        return await task

    def parse(self, episode: EditEpisode, reply: str) -> tuple[EditReply | None, HarnessSpec | None, str]:
        """``reply`` parsed, its child spec and '' — or None, None and why it is invalid."""
        try:
            parsed = EditReply.model_validate_json(reply)
        except ValidationError as err:
            return None, None, f"reply does not parse as {{rationale, patch}}: {str(err.errors()[0]['msg'])[:200]}"
        try:
            child = apply_edit(episode.spec, parsed.patch, tools=self.tools)
        except HarnessError as err:
            return parsed, None, f"patch does not apply, fails its check or changes nothing: {str(err)[:300]}"
        return parsed, child, ""

    async def outcome(self, episode: EditEpisode, reply: str) -> EditOutcome:
        """The reward of ``reply`` (the engineer's text) on ``episode`` (module doc); also kept in
        ``outcomes``."""
        parsed, child, reason = self.parse(episode, reply)
        if child is None:
            out = EditOutcome(self.penalty, False, reason, patch=parsed.patch if parsed else [])
        else:
            base, patched = await asyncio.gather(self.control(episode),
                                                 self._run(child, episode.tasks, episode.seed))
            out = EditOutcome(patched - base, True, "", patched, base, child, parsed.patch)
        self.outcomes.append(out)
        return out


def evaluation_rerun(model: Any, env: Any, checkpoint_id: str, evaluate: Callable[..., Any],
                     concurrency: int = 8, results: list[Any] | None = None) -> Rerun:
    """The real ``Rerun``: ``evaluate`` (``coevo.evaluation.engine.evaluate``) of a spec on the
    given train tasks with the frozen target ``model`` (checkpoint ``checkpoint_id``) and one rollout
    per task at ``seed``, nothing stored; the success of a task is whether its rollout passed.
    ``results``: a list each rerun's ``EvalResult`` is appended to (what the reruns spent:
    ``coevo.meta.budget.engineer_budget``)."""

    async def rerun(spec: HarnessSpec, tasks: Sequence[Task], seed: int) -> list[float]:
        result = await evaluate(spec, checkpoint_id, env, "train", k=1, seeds=[seed], model=model,
                                tasks=list(tasks), concurrency=concurrency)
        if results is not None:
            results.append(result)
        return [float(any(result.per_task[t.id].passed)) for t in tasks]

    return rerun
