"""The profiler (Harness-S Eq. 8, 11): a sibling's behaviour relative to H0 from paired *validation*
runs, as prefer/avoid entries {When, Behavior}.

Two implementations side by side. ``OfflineProfiler`` (deterministic, no key): per task category,
the paired outcome counts of sibling and H0 (a category where the sibling solves more is a prefer
entry, fewer an avoid entry) and the failure causes it removes or adds there. ``LLMProfiler``: an
LLM groups the paired differences into entries (JSON schema, one repair); a reply that
never validates is ignored with its reason and the profile keeps only the measured statistics. Both
see val outcomes only: test outcomes never enter.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from pydantic import BaseModel

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.meta.pool import Profile, ProfileEntry
from coevo.meta.roles import Profiled, Profiler
from coevo.meta.state import EvalSummary
from coevo.models.trajectory import Trajectory
from coevo.roles.diagnosis import diagnose, task_category
from coevo.roles.llm import JsonRole


def statistics(sibling: EvalSummary, h0: EvalSummary, tasks: dict[str, Task]) -> Profile:
    """The measured part of a profile: val success, per-task outcome (1.0 when any rollout passed)
    and per category [n, sibling passes, H0 passes] over the tasks both evaluations ran. Raises
    ``ValueError`` when a task is not a val task (test outcomes never enter a profile)."""
    per_task, categories = {}, {}
    for task_id, outcome in sibling.per_task.items():
        task = tasks.get(task_id)
        if task is None or task.split != "val":
            raise ValueError(f"profile of {sibling.harness_id[:12]}: task {task_id} is not a val task")
        mine = float(any(outcome.passed))
        base = h0.per_task.get(task_id)
        per_task[task_id] = mine
        n, a, b = categories.get(task_category(task), [0, 0, 0])
        categories[task_category(task)] = [n + 1, a + int(mine), b + int(bool(base and any(base.passed)))]
    success = sum(per_task.values()) / len(per_task) if per_task else 0.0
    return Profile(harness_id=sibling.harness_id, checkpoint_id=sibling.checkpoint_id, val_success=success,
                   per_task=per_task, categories=categories)


def failure_shifts(sibling: EvalSummary, h0: EvalSummary, tasks: dict[str, Task],
                   trajectories: dict[str, Trajectory]) -> dict[str, dict[str, list[int]]]:
    """Per task category, per failure cause, [sibling's failed val rollouts, H0's] on the paired
    tasks: the causes a sibling removes or adds. Causes are read without the verifier's details
    (``score_detail`` is dropped: val diagnostics never reach a meta role), so they are the
    gold-free ones (format, truncation, repetition, no answer, ...)."""
    out: dict[str, dict[str, list[int]]] = {}
    for col, summary in enumerate((sibling, h0)):
        for task_id, outcome in summary.per_task.items():
            task = tasks.get(task_id)
            if task is None or task_id not in sibling.per_task:
                continue
            for i in outcome.trajectory_ids:
                t = trajectories.get(i)
                if t is not None and not t.passed:
                    cause = diagnose(t.model_copy(update={"score_detail": {}}))
                    out.setdefault(task_category(task), {}).setdefault(cause, [0, 0])[col] += 1
    return out


class OfflineProfiler:
    """Per-category paired outcome statistics as prefer/avoid entries (module doc), plus, where the
    val rollouts are given, per category the failure causes the sibling removes (prefer) or adds
    (avoid) against H0 (``failure_shifts``)."""

    def profile(self, sibling: EvalSummary, h0: EvalSummary, tasks: dict[str, Task],
                trajectories: dict[str, Trajectory]) -> Profiled:
        """The sibling's profile; H0 itself gets statistics and no entries."""
        prof = statistics(sibling, h0, tasks)
        if sibling.harness_id != h0.harness_id:
            for category, (n, a, b) in sorted(prof.categories.items()):
                entry = ProfileEntry(when=f"task category {category}",
                                     behavior=f"solves {a}/{n} val tasks where H0 solves {b}/{n}")
                (prof.prefer if a > b else prof.avoid if a < b else []).append(entry)
            for category, causes in sorted(failure_shifts(sibling, h0, tasks, trajectories).items()):
                for cause, (mine, base) in sorted(causes.items()):
                    if mine != base:
                        entry = ProfileEntry(when=f"task category {category}",
                                             behavior=f"{mine} val failures by {cause} where H0 has {base}")
                        (prof.prefer if mine < base else prof.avoid).append(entry)
        return Profiled(profile=prof)


class EntriesReply(BaseModel):
    """The LLM profiler's reply: prefer and avoid entries (Eq. 8)."""

    prefer: list[ProfileEntry]
    avoid: list[ProfileEntry]


class LLMProfiler(JsonRole):
    """The profiler as an LLM: the paired val outcomes (task, both answers, both outcomes;
    at most ``max_pairs``) go to the model, which returns prefer/avoid entries relative to H0; an
    entry with an empty condition or behaviour is a validation error (repaired once). A reply that
    never validates leaves the entries empty and says why in ``Profile.reason``."""

    role = "profiler"

    def __init__(self, model: str, max_pairs: int = 30, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.max_pairs = max_pairs

    def profile(self, sibling: EvalSummary, h0: EvalSummary, tasks: dict[str, Task],
                trajectories: dict[str, Trajectory]) -> Profiled:
        """The sibling's profile (see class doc); no call for H0 itself."""
        prof = statistics(sibling, h0, tasks)
        prof.source = self.model
        if sibling.harness_id == h0.harness_id:
            return Profiled(profile=prof)
        pairs = [{"task": tasks[t].prompt[:300], "category": task_category(tasks[t]),
                  "sibling": {"passed": any(o.passed), "answer": _answers(o.trajectory_ids, trajectories)},
                  "H0": {"passed": t in h0.per_task and any(h0.per_task[t].passed),
                         "answer": _answers(h0.per_task[t].trajectory_ids if t in h0.per_task else [], trajectories)}}
                 for t, o in list(sibling.per_task.items())[: self.max_pairs]]

        def check(reply: EntriesReply) -> None:
            for e in reply.prefer + reply.avoid:
                if not e.when.strip() or not e.behavior.strip():
                    raise ValueError("every entry needs a non-empty 'when' and 'behavior'")

        system = ("You profile a sibling agent harness against the base harness H0 for a router. From paired "
                  "validation outcomes, write 'prefer' entries (task conditions where the sibling helps) and "
                  "'avoid' entries (where it hurts), each {when, behavior}.")
        reply = self.ask(system, json.dumps(pairs, indent=1), EntriesReply, check)
        if reply.value is None:
            prof.reason = reply.reason
        else:
            prof.prefer, prof.avoid = reply.value.prefer, reply.value.avoid
        return Profiled(profile=prof, calls=reply.calls)


def _answers(ids: Sequence[str], trajectories: dict[str, Trajectory]) -> list[str]:
    return [str(trajectories[i].final_answer or "")[:120] for i in ids if i in trajectories]


def profiler_for(config: RunConfig, env: Env) -> Profiler:
    """The run's profiler: ``OfflineProfiler`` when ``meta.model == "offline"``, else ``LLMProfiler``."""
    if config.meta.model == "offline":
        return OfflineProfiler()
    return LLMProfiler(config.meta.model, temperature=config.meta.temperature)
