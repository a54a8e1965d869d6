"""The editor: one RFC 6902 JSON-Patch edit of the incumbent harness per repair direction, and at
most one revision after a failed check (Harness-S Table 8).

Two implementations side by side. ``OfflineEditor`` (deterministic, no key, the default and a
baseline) maps each cause to a mechanism: output rules and parser tolerance for interface
violations, a budget hook for runs that end without an answer, and demonstrations mined from
solved train tasks or built from train tasks' gold answers (``demonstration_source``: the env's
``reveal``, train tasks only — the one place a role reads a gold answer, to build a demonstration).
``LLMEditor`` asks an LLM for the patch with a JSON-schema reply; the patch must apply
and the child must validate (checked before acceptance, with one repair call). It sees no gold
answer: its directions' evidence is redacted (``coevo.roles.curator.excerpt``).

The offline editor names in ``Candidate.demo_tasks`` the train tasks its demonstrations answer; for
any editor the loop then finds every train task whose answer the child spec carries
(``coevo.nodes.edit.realise``, ``coevo.meta.sealing``), so those tasks leave later weight stages,
checks and search scoring while the candidate is pending or accepted.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Sequence

from pydantic import BaseModel, Field

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.harnesses.patch import apply_patch
from coevo.harnesses.registry import ACTIONS, CONDITIONS, EVENTS
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.roles import Editor, Proposal
from coevo.meta.state import Candidate, Direction
from coevo.models.trajectory import Trajectory
from coevo.roles.llm import JsonRole
from coevo.roles.patch_schema import patch_schema

# Verifier error types → an instruction that addresses them (matched as regexes on the cause).
RULE_HINTS: list[tuple[str, str]] = [
    (r"positional|keyword", "Pass every argument by keyword, e.g. [func(a=1, b='x')]; never positionally."),
    (r"func(tion)?_?name|wrong_func|function name",
     "Call exactly the function whose name appears in the given list; never invent or copy another name."),
    (r"missing|required|optional_param",
     "Include every required parameter of the function; add optional ones only when the task asks."),
    (r"type|value_error|wrong_value|unexpected",
     "Use the exact values and types the task states (numbers as numbers, strings in quotes)."),
    (r"count|parallel|multiple", "Make exactly as many calls as the task needs, all inside one list."),
    (r"decode|parse|syntax|unparse",
     "Reply with only the call list, e.g. [func(a=1)], with no code fences, no prose and no definitions."),
]


class OfflineEditor:
    """Deterministic edits per cause (see module doc), no key needed. Demonstrations come from ``solved``
    (successful train trajectories) or from ``demo_answer(task, redacted diagnostics)`` (the gold
    answer of a failed train task, ``demonstration_source``; None: solved trajectories only);
    ``max_demos`` caps the demonstrations added per edit."""

    def __init__(self, max_demos: int = 2,
                 demo_answer: Callable[[Task, dict[str, Any]], str | None] | None = None) -> None:
        self.max_demos = max_demos
        self.demo_answer = demo_answer

    def _demos(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
               solved: Sequence[Trajectory]) -> tuple[list[dict[str, Any]], list[str]]:
        """The demonstration ops and the ids of the train tasks whose answers they carry."""
        pairs = [(t.task_id, t.final_answer or "") for t in solved if t.split == "train" and t.passed]
        for ev in direction.evidence:  # a failed train task's gold answer, through demo_answer only
            task = tasks.get(ev.task_id)
            expected = (self.demo_answer(task, ev.diagnostics) if self.demo_answer and task and task.split == "train"
                        else None)
            if expected:
                pairs.append((ev.task_id, expected))
        ops, used, seen = [], [], set(spec.skills)
        for task_id, answer in pairs:
            name = f"demo_{task_id[-8:]}"
            if task_id in tasks and answer and name not in seen and len(ops) < self.max_demos:
                seen.add(name)
                used.append(task_id)
                ops.append({"op": "add", "path": f"/skills/{name}",
                            "value": {"kind": "demonstration", "input": tasks[task_id].prompt, "output": answer}})
        return ops, used

    def _ops(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
             solved: Sequence[Trajectory]) -> tuple[list[dict[str, Any]], str, list[str]]:
        cause = direction.cause.lower()
        if cause.startswith("no_answer:budget") or cause.startswith("no_answer:hook"):
            hook = {"event": "after_model", "condition": "remaining_steps_lte", "parameters": {"threshold": 2},
                    "action": "warn", "message": "Few steps remain: give your final answer now."}
            why = "runs end at the budget without an answer"
            return [{"op": "add", "path": "/hooks/finish_before_budget", "value": hook}], why, []
        ops: list[dict[str, Any]] = []
        why = []
        for pattern, text in RULE_HINTS:
            if re.search(pattern, cause):
                name = "rule_" + re.sub(r"[^a-z]+", "_", pattern)[:24].strip("_")
                if name not in spec.prompt.rules:
                    rule = {"slot": "output_format", "text": text}
                    ops.append({"op": "add", "path": f"/prompt/rules/{name}", "value": rule})
                    why.append(text)
                break
        if re.search(r"decode|parse|syntax|interface|no_answer", cause) and not spec.parser.strip_code_fences:
            ops.append({"op": "replace", "path": "/parser/strip_code_fences", "value": True})
            why.append("tolerate code fences")
        demos, used = self._demos(direction, spec, tasks, solved)
        if demos:
            why.append(f"{len(demos)} demonstration(s) from solved/diagnosed train tasks")
        return ops + demos, "; ".join(why), used

    def propose(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
                solved: Sequence[Trajectory] = ()) -> Proposal:
        """One candidate edit for ``direction``; an empty patch is a rejected candidate. The
        candidate's ``demo_tasks`` name the train tasks its demonstrations answer."""
        ops, why, used = self._ops(direction, spec, tasks, solved)
        cand = Candidate(id=f"{spec.short_id}-{direction.id}", direction=direction.id, parent_id=spec.id, patch=ops,
                         rationale=f"Offline edit for {direction.cause!r}: {why}", demo_tasks=used)
        if not ops:
            cand.status, cand.reason = "rejected", f"no offline edit known for cause {direction.cause!r}"
        return Proposal(candidate=cand)

    def revise(self, direction: Direction, spec: HarnessSpec, candidate: Candidate, feedback: str,
               tasks: dict[str, Task]) -> Proposal:
        """The one revision: keep only the demonstrations or only the rules, whichever the
        candidate had more of (a smaller change), or give up."""
        demos = [op for op in candidate.patch if op["path"].startswith("/skills/")]
        rest = [op for op in candidate.patch if not op["path"].startswith("/skills/")]
        smaller = rest if demos and rest else []
        revised = candidate.model_copy(update={
            "patch": smaller, "revision": candidate.revision + 1, "status": "proposed", "reason": "", "demo_tasks": [],
            "rationale": candidate.rationale + f" | revised after: {feedback}"})
        if not smaller:
            revised.status, revised.reason = "rejected", f"no smaller revision after: {feedback}"
        return Proposal(candidate=revised)


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


class EditReply(BaseModel):
    """The LLM editor's reply: an RFC 6902 patch of the incumbent spec and why it should help."""

    rationale: str
    patch: list[dict[str, Any]] = Field(min_length=1)


class LLMEditor(JsonRole):
    """The editor as an LLM: one JSON-Patch edit of the incumbent per direction; a patch
    that does not apply or yields an invalid spec is a validation error (repaired once), then a
    rejected candidate carrying the reason."""

    role = "editor"

    def _ask_edit(self, direction: Direction, spec: HarnessSpec, extra: str, cand_id: str, revision: int) -> Proposal:
        system = ("You edit an agent harness spec (JSON) with RFC 6902 JSON Patch operations to repair one failure "
                  "direction. Components: prompt (slots + rules), skills, context, memory, hooks, tool_view, parser, "
                  f"budget, decoding. Hook events: {list(EVENTS)}; conditions: {sorted(CONDITIONS)}; "
                  f"actions: {sorted(ACTIONS)}. "
                  "Reply with JSON {\"rationale\": str, \"patch\": [ops]}.")
        user = f"Harness:\n{spec.model_dump_json(indent=1)}\n\nDirection:\n{direction.model_dump_json(indent=1)}{extra}"
        reply = self.ask(system, user, EditReply, lambda r: apply_patch(spec, r.patch), patch_schema(spec))
        cand = Candidate(id=cand_id, direction=direction.id, parent_id=spec.id, revision=revision)
        if reply.value is None:
            cand.status, cand.reason = "rejected", f"editor reply rejected: {reply.reason}"
        else:
            cand.patch, cand.rationale = reply.value.patch, reply.value.rationale
        return Proposal(candidate=cand, calls=reply.calls)

    def propose(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
                solved: Sequence[Trajectory] = ()) -> Proposal:
        """One candidate edit for ``direction``."""
        return self._ask_edit(direction, spec, "", f"{spec.short_id}-{direction.id}", 0)

    def revise(self, direction: Direction, spec: HarnessSpec, candidate: Candidate, feedback: str,
               tasks: dict[str, Task]) -> Proposal:
        """The one revision of ``candidate`` after its check failed with ``feedback``."""
        extra = (f"\n\nYour previous patch:\n{json.dumps(candidate.patch)}\nIt failed its check: {feedback}\n"
                 "Propose one revision.")
        return self._ask_edit(direction, spec, extra, candidate.id, candidate.revision + 1)


def editor_for(config: RunConfig, env: Env) -> Editor:
    """The run's editor: ``OfflineEditor`` (demonstration answers from ``demonstration_source``)
    when ``meta.model == "offline"``, else ``LLMEditor``."""
    if config.meta.model == "offline":
        return OfflineEditor(demo_answer=demonstration_source(env))
    return LLMEditor(config.meta.model, temperature=config.meta.temperature)
