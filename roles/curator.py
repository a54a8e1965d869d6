"""LLM meta roles (curator, editor) through LiteLLM with JSON-schema replies.

Each call asks for JSON matching a pydantic model, validates the reply, and on failure makes one
repair call quoting the validation error (Harness-S Table 8: one revision). A reply that still
does not validate becomes a rejected proposal carrying the reason, never a crash. Every call's
model, tokens and cost are kept in ``calls`` for the archive.
"""

from __future__ import annotations

import json
from typing import Any, Sequence, TypeVar

import litellm
from pydantic import BaseModel, Field, ValidationError

from coevo.envs.base import Task
from coevo.harnesses.errors import HarnessError
from coevo.harnesses.patch import apply_patch
from coevo.harnesses.registry import ACTIONS, CONDITIONS, EVENTS
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import Trajectory
from coevo.roles.offline import excerpt, failure_cause
from coevo.meta.state import Candidate, Direction

M = TypeVar("M", bound=BaseModel)


class DirectionReply(BaseModel):
    """One root-cause group in the curator's reply."""

    cause: str
    description: str
    task_ids: list[str]


class CuratorReply(BaseModel):
    """The curator's reply: every failure grouped by root cause (or left out as unresolved)."""

    directions: list[DirectionReply]


class EditReply(BaseModel):
    """The editor's reply: an RFC 6902 patch of the incumbent spec and why it should help."""

    rationale: str
    patch: list[dict[str, Any]] = Field(min_length=1)


class JsonRole:
    """A LiteLLM-backed role: ``ask`` returns ``(reply | None, reason)``; ``calls`` logs usage.

    ``completion_kwargs`` go to ``litellm.completion`` (e.g. ``mock_response`` in tests,
    ``api_base``, ``temperature``).
    """

    role = "meta"

    def __init__(self, model: str, **completion_kwargs: Any) -> None:
        self.model = model
        self.kwargs = {"temperature": 0.6, "num_retries": 2, "timeout": 120, **completion_kwargs}
        self.calls: list[dict[str, Any]] = []

    def _complete(self, messages: list[dict[str, str]], schema: type[BaseModel]) -> str:
        fmt = {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()}}
        resp = litellm.completion(model=self.model, messages=messages, response_format=fmt, **self.kwargs)
        usage = getattr(resp, "usage", None)
        try:
            cost = float(litellm.completion_cost(completion_response=resp) or 0.0)
        except Exception:  # unpriced or mock model
            cost = 0.0
        self.calls.append({"role": self.role, "model": self.model, "input_tokens": getattr(usage, "prompt_tokens", 0) or 0,
                           "output_tokens": getattr(usage, "completion_tokens", 0) or 0, "cost_usd": cost})
        return resp.choices[0].message.content or ""

    def ask(self, system: str, user: str, schema: type[M], check: Any = None) -> tuple[M | None, str]:
        """Ask for JSON matching ``schema``; ``check(reply)`` may raise ``ValueError`` for semantic
        problems. One repair call on failure. Returns ``(reply, "")`` or ``(None, reason)``."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        reason = ""
        for attempt in range(2):
            try:
                text = self._complete(messages, schema)
            except Exception as err:  # network/provider failure: a rejected proposal, not a crash
                return None, f"{type(err).__name__}: {err}"
            try:
                reply = schema.model_validate_json(_strip_fence(text))
                if check is not None:
                    check(reply)
                return reply, ""
            except (ValidationError, ValueError, HarnessError) as err:
                reason = f"attempt {attempt + 1}: {str(err)[:800]}"
                messages += [{"role": "assistant", "content": text},
                             {"role": "user", "content": f"Your reply was invalid: {err}\nReply again with JSON only, fixing this."}]
        return None, f"invalid reply after one repair: {reason}"


def _strip_fence(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


class LLMCurator(JsonRole):
    """Curator (Harness-S §3.2): group every failed *train* trajectory by root cause; keep groups
    supported by ≥ ``min_failed`` distinct tasks. Falls back to no directions with the reason in
    ``last_reason`` when the reply never validates."""

    role = "curator"

    def __init__(self, model: str, min_failed: int = 2, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.min_failed = min_failed
        self.last_reason = ""

    def curate(self, trajectories: Sequence[Trajectory], spec: HarnessSpec, tasks: dict[str, Task]) -> list[Direction]:
        failed = [t for t in trajectories if t.split == "train" and not t.passed]
        failed_ids = {t.task_id for t in failed}
        evidence = [{**excerpt(t), "task": tasks[t.task_id].prompt[:400] if t.task_id in tasks else "",
                     "verifier_error": failure_cause(t)} for t in failed[:40]]

        def check(reply: CuratorReply) -> None:
            for d in reply.directions:
                unknown = set(d.task_ids) - failed_ids
                if unknown:
                    raise ValueError(f"direction {d.cause!r} names task ids that are not failures: {sorted(unknown)[:5]}")

        system = ("You are the failure curator of an agent-harness search. Group every failed trajectory by root cause, "
                  f"as repair directions; each direction must be supported by at least {self.min_failed} distinct failed tasks.")
        user = f"Current harness:\n{spec.model_dump_json(indent=1)}\n\nFailures (train split):\n{json.dumps(evidence, indent=1)}"
        reply, self.last_reason = self.ask(system, user, CuratorReply, check)
        if reply is None:
            return []
        by_id = {t.task_id: t for t in failed}
        return [Direction(id=f"d{i}", cause=d.cause, description=d.description, task_ids=sorted(set(d.task_ids)),
                          evidence=[excerpt(by_id[x]) for x in sorted(set(d.task_ids))[:3]])
                for i, d in enumerate(reply.directions) if len(set(d.task_ids)) >= self.min_failed]


class LLMEditor(JsonRole):
    """Editor: one JSON-Patch edit of the incumbent per direction; the patch must apply and the
    child must validate (checked before acceptance, with one repair call)."""

    role = "editor"

    def _ask_edit(self, direction: Direction, spec: HarnessSpec, extra: str, cand_id: str, revision: int) -> Candidate:
        system = ("You edit an agent harness spec (JSON) with RFC 6902 JSON Patch operations to repair one failure "
                  "direction. Components: prompt (slots + rules), skills, context, memory, hooks, tool_view, parser, budget, "
                  f"decoding. Hook events: {list(EVENTS)}; conditions: {sorted(CONDITIONS)}; actions: {sorted(ACTIONS)}. "
                  "Reply with JSON {\"rationale\": str, \"patch\": [ops]}.")
        user = f"Harness:\n{spec.model_dump_json(indent=1)}\n\nDirection:\n{direction.model_dump_json(indent=1)}{extra}"
        reply, reason = self.ask(system, user, EditReply, lambda r: apply_patch(spec, r.patch))
        cand = Candidate(id=cand_id, direction=direction.id, parent_id=spec.id, revision=revision)
        if reply is None:
            cand.status, cand.reason = "rejected", f"editor reply rejected: {reason}"
        else:
            cand.patch, cand.rationale = reply.patch, reply.rationale
        return cand

    def propose(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
                solved: Sequence[Trajectory] = ()) -> Candidate:
        return self._ask_edit(direction, spec, "", f"{spec.short_id}-{direction.id}", 0)

    def revise(self, direction: Direction, spec: HarnessSpec, candidate: Candidate, feedback: str,
               tasks: dict[str, Task]) -> Candidate:
        extra = f"\n\nYour previous patch:\n{json.dumps(candidate.patch)}\nIt failed its check: {feedback}\nPropose one revision."
        return self._ask_edit(direction, spec, extra, candidate.id, candidate.revision + 1)
