"""Offline meta roles: a deterministic curator and editor that need no API key.

They are the default when no LLM is configured and a baseline for the LLM roles. The curator
groups failed *train* trajectories by the verifier's own error type (or by how the episode
ended); the editor maps each cause to a mechanism: output rules and parser tolerance for
interface violations, a budget hook for runs that end without an answer, and demonstrations
mined from solved train tasks or built from train tasks' scoring diagnostics (never val/test).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any, Callable, Sequence

from coevo.envs.base import Task
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import Trajectory
from coevo.meta.state import Candidate, Direction

# Verifier error types → an instruction that addresses them (matched as regexes on the cause).
RULE_HINTS: list[tuple[str, str]] = [
    (r"positional|keyword", "Pass every argument by keyword, e.g. [func(a=1, b='x')]; never positionally."),
    (r"func(tion)?_?name|wrong_func|function name", "Call exactly the function whose name appears in the given list; never invent or copy another name."),
    (r"missing|required|optional_param", "Include every required parameter of the function; add optional ones only when the task asks."),
    (r"type|value_error|wrong_value|unexpected", "Use the exact values and types the task states (numbers as numbers, strings in quotes)."),
    (r"count|parallel|multiple", "Make exactly as many calls as the task needs, all inside one list."),
    (r"decode|parse|syntax|unparse", "Reply with only the call list, e.g. [func(a=1)], with no code fences, no prose and no definitions."),
]


def failure_cause(t: Trajectory) -> str:
    """The root-cause label of a failed trajectory: how it ended, else the verifier's own error type
    (``detail["public"]["error_type"]``/``["verifier_error"]``, e.g. BFCL's ``simple_function_checker:wrong_func_name``)."""
    if t.final_answer is None:
        return f"no_answer:{t.stop_reason or 'unknown'}"
    detail = t.score_detail or {}
    public = detail.get("public") if isinstance(detail.get("public"), dict) else {}
    for value in (public.get("error_type"), public.get("verifier_error"), detail.get("error_type"), detail.get("error")):
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str) and value.strip():
            return value.strip()[:80]
    if t.interface_violations:
        return "interface_violation"
    return "wrong_answer"


def excerpt(t: Trajectory, chars: int = 300) -> dict[str, Any]:
    """Evidence from a *train* trajectory: its answer, last reply and scoring diagnostics."""
    replies = [m for m in t.messages if m.get("type") == "ai"]
    last = str(replies[-1]["data"].get("content", ""))[:chars] if replies else ""
    return {"task_id": t.task_id, "answer": (t.final_answer or "")[:chars], "last_reply": last,
            "stop_reason": t.stop_reason, "diagnostics": json.loads(json.dumps(t.score_detail, default=str))}


class OfflineCurator:
    """Group failures by ``failure_cause``; keep causes with ≥ ``min_failed`` distinct tasks.

    Only ``split == "train"`` trajectories are read (validation/test answers never reach it).
    Directions are ordered by support, largest first; each carries one excerpt per failed task
    (at most ``max_evidence``).
    """

    def __init__(self, min_failed: int = 2, max_evidence: int = 5) -> None:
        self.min_failed, self.max_evidence = min_failed, max_evidence

    def curate(self, trajectories: Sequence[Trajectory], spec: HarnessSpec, tasks: dict[str, Task]) -> list[Direction]:
        groups: dict[str, list[Trajectory]] = defaultdict(list)
        for t in trajectories:
            if t.split == "train" and not t.passed:
                groups[failure_cause(t)].append(t)
        directions = []
        for cause, ts in sorted(groups.items(), key=lambda kv: (-len({t.task_id for t in kv[1]}), kv[0])):
            task_ids = sorted({t.task_id for t in ts})
            if len(task_ids) >= self.min_failed:
                first = {t.task_id: t for t in reversed(ts)}  # one excerpt per distinct task
                directions.append(Direction(id=f"d{len(directions)}-{re.sub(r'[^a-z0-9]+', '_', cause.lower())[:40]}",
                                            cause=cause, description=f"{len(task_ids)} train tasks fail with {cause!r}",
                                            task_ids=task_ids, evidence=[excerpt(first[i]) for i in task_ids[:self.max_evidence]]))
        return directions


class OfflineEditor:
    """Deterministic edits per cause (see module doc). Demonstrations come from ``solved``
    (successful train trajectories) or from ``demo_answer(task, train diagnostics)`` (default: an
    ``expected`` field); ``max_demos`` caps the demonstrations added per edit."""

    def __init__(self, max_demos: int = 2, demo_answer: Callable[[Task, dict[str, Any]], str | None] | None = None) -> None:
        self.max_demos = max_demos
        self.demo_answer = demo_answer or _expected

    def _demos(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
               solved: Sequence[Trajectory]) -> list[dict[str, Any]]:
        pairs = [(t.task_id, t.final_answer or "") for t in solved if t.split == "train" and t.passed]
        for ev in direction.evidence:  # train scoring diagnostics may carry the expected answer
            task = tasks.get(ev["task_id"])
            expected = self.demo_answer(task, ev.get("diagnostics") or {}) if task and task.split == "train" else None
            if expected:
                pairs.append((ev["task_id"], expected))
        ops, seen = [], set(spec.skills)
        for task_id, answer in pairs:
            name = f"demo_{task_id[-8:]}"
            if task_id in tasks and answer and name not in seen and len(ops) < self.max_demos:
                seen.add(name)
                ops.append({"op": "add", "path": f"/skills/{name}",
                            "value": {"kind": "demonstration", "input": tasks[task_id].prompt, "output": answer}})
        return ops

    def _ops(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
             solved: Sequence[Trajectory]) -> tuple[list[dict[str, Any]], str]:
        cause = direction.cause.lower()
        if cause.startswith("no_answer:budget") or cause.startswith("no_answer:hook"):
            hook = {"event": "after_model", "condition": "remaining_steps_lte", "parameters": {"threshold": 2},
                    "action": "warn", "message": "Few steps remain: give your final answer now."}
            return [{"op": "add", "path": "/hooks/finish_before_budget", "value": hook}], "runs end at the budget without an answer"
        ops: list[dict[str, Any]] = []
        why = []
        for pattern, text in RULE_HINTS:
            if re.search(pattern, cause):
                name = "rule_" + re.sub(r"[^a-z]+", "_", pattern)[:24].strip("_")
                if name not in spec.prompt.rules:
                    ops.append({"op": "add", "path": f"/prompt/rules/{name}", "value": {"slot": "output_format", "text": text}})
                    why.append(text)
                break
        if re.search(r"decode|parse|syntax|interface|no_answer", cause) and not spec.parser.strip_code_fences:
            ops.append({"op": "replace", "path": "/parser/strip_code_fences", "value": True})
            why.append("tolerate code fences")
        demos = self._demos(direction, spec, tasks, solved)
        if demos:
            why.append(f"{len(demos)} demonstration(s) from solved/diagnosed train tasks")
        return ops + demos, "; ".join(why)

    def propose(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
                solved: Sequence[Trajectory] = ()) -> Candidate:
        """One candidate edit for ``direction``; an empty patch is a rejected candidate."""
        ops, why = self._ops(direction, spec, tasks, solved)
        cand = Candidate(id=f"{spec.short_id}-{direction.id}", direction=direction.id, parent_id=spec.id, patch=ops,
                         rationale=f"Offline edit for {direction.cause!r}: {why}")
        if not ops:
            cand.status, cand.reason = "rejected", f"no offline edit known for cause {direction.cause!r}"
        return cand

    def revise(self, direction: Direction, spec: HarnessSpec, candidate: Candidate, feedback: str,
               tasks: dict[str, Task]) -> Candidate:
        """The one revision: keep only the demonstrations or only the rules, whichever the
        candidate had more of (a smaller change), or give up."""
        demos = [op for op in candidate.patch if op["path"].startswith("/skills/")]
        rest = [op for op in candidate.patch if not op["path"].startswith("/skills/")]
        smaller = rest if demos and rest else []
        revised = candidate.model_copy(update={"patch": smaller, "revision": candidate.revision + 1, "status": "proposed",
                                               "reason": "", "rationale": candidate.rationale + f" | revised after: {feedback}"})
        if not smaller:
            revised.status, revised.reason = "rejected", f"no smaller revision after: {feedback}"
        return revised


def _expected(task: Task, detail: dict[str, Any]) -> str | None:
    """The expected answer stated in a train task's scoring diagnostics, if any."""
    for key in ("expected", "gold"):
        value = detail.get(key)
        if value not in (None, ""):
            return value if isinstance(value, str) else json.dumps(value)
    return None
