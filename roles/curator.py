"""The curator (Harness-S §3.2): failed *train* trajectories grouped by root cause into repair
directions, each supported by ≥ ``min_failed`` distinct failed tasks.

Two implementations side by side: ``OfflineCurator`` (deterministic, no key: groups by the
verifier's own error type or by how the episode ended) and ``LLMCurator`` (any chat model through
``coevo.roles.llm``: a JSON-schema reply and one repair retry). Only ``split == "train"`` trajectories are read, so
validation and test answers never reach a curator, and their scoring diagnostics are redacted
(``coevo.envs.redact``): no gold answer reaches a curator, nor the editors it briefs.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any, Sequence

from pydantic import BaseModel

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.envs.redact import redact_detail
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.roles import Curation, Curator
from coevo.meta.state import Direction, Evidence
from coevo.models.trajectory import Trajectory
from coevo.roles.llm import JsonRole, narrowed


def failure_cause(t: Trajectory) -> str:
    """The root-cause label of a failed trajectory: how it ended, else the verifier's own error type
    (``detail["public"]["error_type"]``/``["verifier_error"]``, e.g. BFCL's
    ``simple_function_checker:wrong_func_name``), read from the redacted detail (a checker message
    that may quote the gold answer is never a label)."""
    if t.final_answer is None:
        return f"no_answer:{t.stop_reason or 'unknown'}"
    detail = redact_detail(t.split, t.score_detail or {})
    public = detail.get("public") if isinstance(detail.get("public"), dict) else {}
    candidates = (public.get("error_type"), public.get("verifier_error"), detail.get("error_type"), detail.get("error"))
    for value in candidates:
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str) and value.strip():
            return value.strip()[:80]
    if t.interface_violations:
        return "interface_violation"
    return "wrong_answer"


def excerpt(t: Trajectory, chars: int = 300) -> Evidence:
    """Evidence from a *train* trajectory: its answer and last reply (cut to ``chars``), why it
    stopped, and its scoring diagnostics redacted for meta roles (no gold answer; JSON-safe copy)."""
    replies = [m for m in t.messages if m.get("type") == "ai"]
    last = str(replies[-1]["data"].get("content", ""))[:chars] if replies else ""
    return Evidence(task_id=t.task_id, answer=(t.final_answer or "")[:chars], last_reply=last,
                    stop_reason=t.stop_reason,
                    diagnostics=json.loads(json.dumps(redact_detail(t.split, t.score_detail or {}), default=str)))


class OfflineCurator:
    """Group failures by ``failure_cause``; keep causes with ≥ ``min_failed`` distinct tasks.

    Directions are ordered by support, largest first; each carries one excerpt per failed task
    (at most ``max_evidence``).
    """

    def __init__(self, min_failed: int = 2, max_evidence: int = 5) -> None:
        self.min_failed, self.max_evidence = min_failed, max_evidence

    def curate(self, trajectories: Sequence[Trajectory], spec: HarnessSpec, tasks: dict[str, Task]) -> Curation:
        """The directions of ``trajectories``' train failures (see class doc)."""
        groups: dict[str, list[Trajectory]] = defaultdict(list)
        for t in trajectories:
            if t.split == "train" and not t.passed:
                groups[failure_cause(t)].append(t)
        directions = []
        for cause, ts in sorted(groups.items(), key=lambda kv: (-len({t.task_id for t in kv[1]}), kv[0])):
            task_ids = sorted({t.task_id for t in ts})
            if len(task_ids) >= self.min_failed:
                first = {t.task_id: t for t in reversed(ts)}  # one excerpt per distinct task
                slug = re.sub(r"[^a-z0-9]+", "_", cause.lower())[:40]
                directions.append(Direction(id=f"d{len(directions)}-{slug}", cause=cause, task_ids=task_ids,
                                            description=f"{len(task_ids)} train tasks fail with {cause!r}",
                                            evidence=[excerpt(first[i]) for i in task_ids[:self.max_evidence]]))
        return Curation(directions=directions)


class DirectionReply(BaseModel):
    """One root-cause group in the LLM curator's reply."""

    cause: str
    description: str
    task_ids: list[str]


class CuratorReply(BaseModel):
    """The LLM curator's reply: every failure grouped by root cause (or left out as unresolved)."""

    directions: list[DirectionReply]


class LLMCurator(JsonRole):
    """The curator as an LLM: every failed train trajectory (up to 40, with the task and
    the verifier's error) goes to the model, which groups them by root cause; a group naming a task
    that did not fail is a validation error (repaired once). A reply that never validates gives no
    directions and says why in ``Curation.reason``."""

    role = "curator"

    def __init__(self, model: str, min_failed: int = 2, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.min_failed = min_failed

    def curate(self, trajectories: Sequence[Trajectory], spec: HarnessSpec, tasks: dict[str, Task]) -> Curation:
        """The directions of ``trajectories``' train failures (see class doc); no call without failures."""
        failed = [t for t in trajectories if t.split == "train" and not t.passed]
        if not failed:
            return Curation(reason="no failed train trajectory")
        failed_ids = {t.task_id for t in failed}
        evidence = [{**excerpt(t).model_dump(), "task": tasks[t.task_id].prompt[:400] if t.task_id in tasks else "",
                     "verifier_error": failure_cause(t)} for t in failed[:40]]

        def check(reply: CuratorReply) -> None:
            for d in reply.directions:
                unknown = set(d.task_ids) - failed_ids
                if unknown:
                    raise ValueError(f"direction {d.cause!r} names task ids that are not failures: "
                                     f"{sorted(unknown)[:5]}")

        system = ("You are the failure curator of an agent-harness search. Group every failed trajectory by root "
                  "cause, as repair directions; each direction must be supported by at least "
                  f"{self.min_failed} distinct failed tasks.")
        user = (f"Current harness:\n{spec.model_dump_json(indent=1)}\n\n"
                f"Failures (train split):\n{json.dumps(evidence, indent=1)}")
        fmt = narrowed(CuratorReply, directions={"maxItems": max(1, min(8, len(failed_ids) // self.min_failed))},
                       DirectionReply__cause={"maxLength": 80},
                       DirectionReply__task_ids={"items": {"enum": sorted(failed_ids)}, "minItems": self.min_failed})
        reply = self.ask(system, user, CuratorReply, check, fmt)
        if reply.value is None:
            return Curation(reason=reply.reason, calls=reply.calls)
        by_id = {t.task_id: t for t in failed}
        directions = [Direction(id=f"d{i}", cause=d.cause, description=d.description, task_ids=sorted(set(d.task_ids)),
                                evidence=[excerpt(by_id[x]) for x in sorted(set(d.task_ids))[:3]])
                      for i, d in enumerate(reply.value.directions) if len(set(d.task_ids)) >= self.min_failed]
        return Curation(directions=directions, calls=reply.calls)


def curator_for(config: RunConfig, env: Env) -> Curator:
    """The run's curator: ``OfflineCurator`` when ``meta.model == "offline"``, else ``LLMCurator``."""
    if config.meta.model == "offline":
        return OfflineCurator(config.meta.min_failed_tasks)
    return LLMCurator(config.meta.model, config.meta.min_failed_tasks, temperature=config.meta.temperature)
