"""The editor: one RFC 6902 JSON-Patch edit of the incumbent harness per repair direction, and at
most one revision after a failed check (Harness-S Table 8).

Two implementations side by side. ``OfflineEditor`` (no key, the default and a baseline) samples
one operator of ``coevo.roles.operators`` per candidate among those that address the direction's
causes (prompt rules, demonstrations mined from solved train tasks or built from train tasks' gold
answers — ``demonstration_source``: the env's ``reveal``, train tasks only, the one place a role
reads a gold answer, to build a demonstration —; parser variants, hooks, budgets, decoding,
context, tool view), seeded by run, round and direction, so several candidates of one round differ.
``LLMEditor`` asks an LLM for the patch with a JSON-schema reply; the patch must apply
and the child must validate (checked before acceptance, with one repair call). It sees no gold
answer: its directions' evidence is redacted (``coevo.roles.curator.excerpt``).

The offline editor names in ``Candidate.demo_tasks`` the train tasks its demonstrations answer; for
any editor the loop then finds every train task whose answer the child spec carries
(``coevo.nodes.refine.realise``, ``coevo.meta.sealing``), so those tasks leave later weight stages,
checks and search scoring while the candidate is pending or accepted.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Collection, Sequence

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.harnesses.agent import narrow
from coevo.harnesses.patch import apply_edit
from coevo.harnesses.patch_schema import patch_schema
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.roles import Editor, Proposal
from coevo.meta.state import Candidate, Direction
from coevo.models.trajectory import Trajectory
from coevo.roles.llm import JsonRole
from coevo.roles.operators import OPERATORS, Material, draw, expected_answer, seed_of
from coevo.roles.operators.prompt import RULE_HINTS  # noqa: F401  (re-exported)
from coevo.training.harness_r1.edit_env import EditReply, edit_system


class OfflineEditor:
    """Sampled edits from the operator library (``coevo.roles.operators``), no key needed: for
    candidate ``sample`` of a direction in ``round``, ``draw`` orders the operators addressing the
    direction's causes by a seed of (run ``seed``, ``round``, direction id) and takes the
    ``sample``-th with an edit, so one round yields several distinct candidates and some of them
    hurt (the gate has something to reject). Demonstrations come from ``solved`` (successful train
    trajectories) or from ``demo_answer(task, train diagnostics)`` (default: an ``expected``
    field); ``max_demos`` caps the demonstrations added per edit; ``operators`` restricts the
    library to those names (None: every registered operator) and ``exclude`` leaves those out;
    ``env_tools`` names the tools the env offers (or a callable giving them, asked once when first
    needed: ``env_tool_names``), which ``tool_expose`` may show the model."""

    def __init__(self, max_demos: int = 2, demo_answer: Callable[[Task, dict[str, Any]], str | None] | None = None,
                 seed: int = 0, operators: Sequence[str] | None = None, exclude: Collection[str] = (),
                 env_tools: Sequence[str] | Callable[[], Sequence[str]] = ()) -> None:
        self.max_demos, self.seed, self._env_tools = max_demos, seed, env_tools
        self.operators = [n for n in (operators or OPERATORS) if n not in exclude] if exclude else operators
        self.demo_answer = demo_answer or expected_answer

    def propose(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
                solved: Sequence[Trajectory] = (), *, round: int = 0, sample: int = 0,
                allowed: Sequence[str] | None = None) -> Proposal:
        """Candidate ``sample`` for ``direction`` in ``round`` (inside ``allowed`` JSON Pointer
        prefixes when given, and for a user agent's harness inside its declared params); a direction
        no operator has an edit for is a rejected candidate. The
        candidate's ``demo_tasks`` name the train tasks its demonstrations answer."""
        if callable(self._env_tools):
            self._env_tools = tuple(self._env_tools())
        material = Material(direction, spec, tasks, solved, self.demo_answer, self.max_demos, self._env_tools)
        picked = draw(material, seed_of(self.seed, round, direction.id), sample, narrow(allowed, spec), self.operators)
        cand = Candidate(id=f"{spec.short_id}-{direction.id}" + (f"-s{sample}" if sample else ""),
                         direction=direction.id, parent_id=spec.id)
        if picked is None:
            cand.status, cand.reason = "rejected", f"no offline edit known for cause {direction.cause!r}"
        else:
            op, edit = picked
            cand.patch, cand.demo_tasks = edit.ops, edit.demo_tasks
            cand.rationale = f"Offline edit for {direction.cause!r} by operator {op.name} ({op.component}): {edit.why}"
        return Proposal(candidate=cand)

    def revise(self, direction: Direction, spec: HarnessSpec, candidate: Candidate, feedback: str,
               tasks: dict[str, Task]) -> Proposal:
        """The one revision: a smaller change (the first half of the candidate's operations, and the
        demonstrated tasks those still carry), or give up when it has a single operation."""
        smaller = candidate.patch[: len(candidate.patch) // 2]
        kept = json.dumps(smaller)
        demos = [t for t in candidate.demo_tasks if t in tasks and json.dumps(tasks[t].prompt)[1:-1] in kept]
        revised = candidate.model_copy(update={
            "patch": smaller, "revision": candidate.revision + 1, "status": "proposed", "reason": "",
            "demo_tasks": demos, "rationale": candidate.rationale + f" | revised after: {feedback}"})
        if not smaller:
            revised.status, revised.reason = "rejected", f"no smaller revision after: {feedback}"
        return Proposal(candidate=revised)


def env_tool_names(env: Env) -> list[str]:
    """The names of the tools ``env`` offers in an episode of its first train task (none without one);
    the episode is closed again. Tool names only: no task content."""
    tasks = env.tasks("train", 1)
    if not tasks:
        return []
    episode = env.episode(tasks[0])
    try:
        return [t.name for t in episode.tools]
    finally:
        close = getattr(episode, "close", None)
        if callable(close):
            close()


def demonstration_source(env: Env) -> Callable[[Task, dict[str, Any]], str | None] | None:
    """The offline editor's source of demonstration answers for ``env``: its own
    ``demonstration_answer(task, diagnostics)`` when it has one, else the gold answer of a *train*
    task from ``env.reveal`` (val/test: None). None when the env offers neither."""
    own = getattr(env, "demonstration_answer", None)
    if callable(own):
        return own
    reveal = getattr(env, "reveal", None)
    if not callable(reveal):
        return None
    return lambda task, diagnostics: str(reveal(task)) if task.split == "train" else None


class LLMEditor(JsonRole):
    """The editor as an LLM: one JSON-Patch edit of the incumbent per direction; a patch
    that does not apply, yields an invalid spec or changes nothing (``apply_edit``) is a validation
    error (repaired once), then a rejected candidate carrying the reason."""

    role = "editor"

    def messages(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task]) -> tuple[str, str]:
        """The (system, user) prompt of an edit of ``spec`` for ``direction`` (``tasks``: train tasks by id)."""
        system = edit_system("You edit an agent harness spec (JSON) to repair one failure direction")
        return system, (f"Harness:\n{spec.model_dump_json(indent=1)}\n\n"
                        f"Direction:\n{direction.model_dump_json(indent=1)}")

    def reply_schema(self, spec: HarnessSpec) -> dict[str, Any]:
        """The JSON schema the reply is asked in (``patch_schema``)."""
        return patch_schema(spec)

    def _ask_edit(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task], extra: str, cand_id: str,
                  revision: int) -> Proposal:
        system, user = self.messages(direction, spec, tasks)
        reply = self.ask(system, user + extra, EditReply, lambda r: apply_edit(spec, r.patch), self.reply_schema(spec))
        cand = Candidate(id=cand_id, direction=direction.id, parent_id=spec.id, revision=revision)
        if reply.value is None:
            cand.status, cand.reason = "rejected", f"{self.role} reply rejected: {reply.reason}"
        else:
            cand.patch, cand.rationale = reply.value.patch, reply.value.rationale
        return Proposal(candidate=cand, calls=reply.calls)

    def propose(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
                solved: Sequence[Trajectory] = (), *, round: int = 0, sample: int = 0,
                allowed: Sequence[str] | None = None) -> Proposal:
        """One candidate edit for ``direction`` (a later ``sample`` is another reply at the role's temperature)."""
        suffix = f"-s{sample}" if sample else ""
        return self._ask_edit(direction, spec, tasks, "", f"{spec.short_id}-{direction.id}{suffix}", 0)

    def revise(self, direction: Direction, spec: HarnessSpec, candidate: Candidate, feedback: str,
               tasks: dict[str, Task]) -> Proposal:
        """The one revision of ``candidate`` after its check failed with ``feedback``."""
        extra = (f"\n\nYour previous patch:\n{json.dumps(candidate.patch)}\nIt failed its check: {feedback}\n"
                 "Propose one revision.")
        return self._ask_edit(direction, spec, tasks, extra, candidate.id, candidate.revision + 1)


UNMEASURED_UNDER_EVAL_TEMPERATURE = ("decoding_temperature",)
"""Offline operators whose edit no evaluation of the run can see when ``eval.temperature`` is set: val
and test then sample at it whatever the harness's ``decoding.temperature`` says, and training rollouts
always sample at ``train.temperature`` (``coevo.training.kinds.training_spec``), so such a candidate
would score exactly its parent and only spend a val evaluation."""


def editor_for(config: RunConfig, env: Env) -> Editor:
    """The run's editor: ``OfflineEditor`` (demonstration answers from ``demonstration_source``;
    without the ``UNMEASURED_UNDER_EVAL_TEMPERATURE`` operators when ``eval.temperature`` is set)
    when ``meta.model == "offline"``, else ``LLMEditor``."""
    if config.meta.model == "offline":
        exclude = UNMEASURED_UNDER_EVAL_TEMPERATURE if config.eval.temperature is not None else ()
        return OfflineEditor(demo_answer=demonstration_source(env), seed=config.seed, exclude=exclude,
                             env_tools=(lambda: env_tool_names(env)) if env is not None else ())
    return LLMEditor(config.meta.model, temperature=config.meta.temperature)
