"""The curator (Harness-S §3.2): failed *train* trajectories grouped by root cause into repair
directions, each supported by ≥ ``min_failed`` distinct failed tasks.

Two implementations side by side: ``OfflineCurator`` (deterministic, no key: reads each trajectory
for its root cause with ``coevo.roles.diagnosis`` and groups by cause and task category) and
``LLMCurator`` (any chat model through ``coevo.roles.llm``: a JSON-schema reply and one repair
retry). Only ``split == "train"`` trajectories are read, so validation and test answers never reach a
curator, and the evidence it hands on is redacted (``coevo.envs.redact``): no gold answer reaches an
LLM curator, nor the editors it briefs. (The offline curator compares a train reply with its gold
answer to pick a cause label from a fixed list; the answer itself never leaves it.)
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any, Sequence

from pydantic import BaseModel

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.roles import Curation, Curator
from coevo.meta.state import Direction, Evidence
from coevo.models.trajectory import Trajectory
from coevo.roles.diagnosis import CAUSES, diagnose, task_category, with_category
from coevo.roles.llm import JsonRole, narrowed
from coevo.training.harness_r1.edit_env import failure_excerpt


def failure_cause(t: Trajectory) -> str:
    """The root-cause label of a failed trajectory read alone (``coevo.roles.diagnosis.diagnose``
    without the harness or the task): how it ended, the verifier's own error type (e.g. BFCL's
    ``simple_function_checker:wrong_func_name``), what the trajectory shows, else ``wrong_answer``."""
    return diagnose(t)


def excerpt(t: Trajectory, chars: int = 300) -> Evidence:
    """Evidence from a *train* trajectory: its answer and last reply (cut to ``chars``), why it
    stopped, and its scoring diagnostics redacted for meta roles (no gold answer; JSON-safe copy)."""
    return Evidence(**failure_excerpt(t, chars))


class OfflineCurator:
    """Read each failed train trajectory for its root cause (``diagnose``: format, truncation,
    repetition, tool errors, the answer's place, form and value, ...) and group the failures by
    (cause, task category): a group with >= ``min_failed`` distinct tasks is a direction
    ``cause@category``; the leftovers of one cause across categories pool into a direction ``cause``
    when they reach ``min_failed`` together. With one category in the train tasks the category is
    left out. Directions are ordered by support, largest first; each carries one excerpt per failed
    task (at most ``max_evidence``). Distinct causes give distinct directions.
    """

    def __init__(self, min_failed: int = 2, max_evidence: int = 5) -> None:
        self.min_failed, self.max_evidence = min_failed, max_evidence

    def curate(self, trajectories: Sequence[Trajectory], spec: HarnessSpec, tasks: dict[str, Task]) -> Curation:
        """The directions of ``trajectories``' train failures (see class doc)."""
        several = len({task_category(t) for t in tasks.values()}) > 1
        groups: dict[tuple[str, str], list[Trajectory]] = defaultdict(list)
        for t in trajectories:
            if t.split == "train" and not t.passed:
                task = tasks.get(t.task_id)
                groups[(diagnose(t, spec, task), task_category(task) if several else "")].append(t)
        supported: list[tuple[str, list[Trajectory]]] = []
        leftovers: dict[str, list[Trajectory]] = defaultdict(list)
        for (kind, category), ts in groups.items():
            if len({t.task_id for t in ts}) >= self.min_failed:
                supported.append((with_category(kind, category), ts))
            else:
                leftovers[kind] += ts
        supported += [(kind, ts) for kind, ts in leftovers.items() if len({t.task_id for t in ts}) >= self.min_failed]
        directions = []
        for cause, ts in sorted(supported, key=lambda kv: (-len({t.task_id for t in kv[1]}), kv[0])):
            task_ids = sorted({t.task_id for t in ts})
            first = {t.task_id: t for t in reversed(ts)}  # one excerpt per distinct task
            slug = re.sub(r"[^a-z0-9]+", "_", cause.lower())[:40]
            kind, _, category = cause.partition("@")
            meaning = CAUSES.get(kind) or CAUSES.get(kind.split(":")[0]) or f"the verifier reports {kind!r}"
            where = f" on {category} tasks" if category else ""
            directions.append(Direction(id=f"d{len(directions)}-{slug}", cause=cause, task_ids=task_ids,
                                        description=f"{len(task_ids)} train tasks fail{where}: {meaning} ({kind})",
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
    that did not fail is a validation error (repaired once). The reply format sent is narrowed to this
    call (``narrowed``): a direction's ``task_ids`` come from the failed ones, at least ``min_failed``
    and at most as many as failed (a model decoding under the format, such as a local one, cannot
    invent an id or repeat one past that: SmolLM2-135M listed one id eight times), and there are at
    most ``len(failed) // min_failed`` directions (up to 8). A reply that never validates gives no
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
                       DirectionReply__task_ids={"items": {"enum": sorted(failed_ids)}, "minItems": self.min_failed,
                                                 "maxItems": max(self.min_failed, len(failed_ids))})
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
