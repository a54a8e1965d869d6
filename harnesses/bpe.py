"""EvoHarness-RL's Belief-Progress-Experience (BPE) state and the harness actions that reach it.

Source: EvoHarness-RL ("Learning Runtime Harness Coordination for Self-Evolving Agents",
arXiv:2608.05446), its abstract: the
policy builds and uses external harness state (Belief: hypotheses about the world state; Progress:
subgoals done and pending; Experience: lessons that persist across episodes) through harness
actions, each with a cost, so that cost-aware GRPO can teach *selective* access. The abstract fixes
no action signatures, costs or caps: the four tools below and their arguments are coevo's choice.

The state of one episode is a plain dict (it travels in ``HarnessState["bpe"]``)::

    {"belief": [str], "progress": {"done": [str], "pending": [str]},
     "experience": [str],       # the lineage's lessons at the start, plus those consolidated since
     "consolidated": [str]}     # the lessons this episode consolidated (what the lineage keeps)

``apply_action`` is the one place an action changes it (pure: a new dict and the tool's reply);
the state is rendered into context only by ``bpe_read`` (``render: on_read``) or after every turn
(``render: always``). Experience outlives the episode behind ``ExperienceStore`` (per harness
lineage; ``InMemoryExperience`` in a process, ``ArchiveExperience`` in the archive: what a run uses),
which the meta-loop reaches through its run context.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Mapping, Protocol, Sequence

from coevo.envs.base import Tool
from coevo.harnesses.spec import BPE

ACTIONS = {"bpe_read": "read", "bpe_update_belief": "update_belief",
           "bpe_update_progress": "update_progress", "bpe_consolidate": "consolidate"}
"""Tool name -> the ``ActionCosts`` field (and the action's name in ``Trajectory.harness_actions``)."""
TEXT_ARGUMENT = {"bpe_update_belief": "hypothesis", "bpe_update_progress": "subgoal", "bpe_consolidate": "lesson"}
"""The argument holding the entry each writing action records."""
READS = frozenset({"bpe_read"})
"""The actions that read the state; the others write it."""
PARTS = ("all", "belief", "progress", "experience")


def _no_call(**_: Any) -> str:
    raise RuntimeError("a BPE tool runs through coevo.harnesses.bpe.apply_action, not Tool.fn")


def bpe_tools() -> list[Tool]:
    """The four harness actions as model-visible tools (names in ``ACTIONS``). The engine runs them
    with ``apply_action`` on the episode's state, never through ``Tool.fn``."""
    text = {"type": "string"}
    return [
        Tool("bpe_read", "Read your harness state (belief, progress, experience lessons). Costs a little: "
             "read only when you need it.",
             {"type": "object", "properties": {"part": {"type": "string", "enum": list(PARTS)}}}, _no_call),
        Tool("bpe_update_belief", "Record a hypothesis about the current world state.",
             {"type": "object", "properties": {"hypothesis": text}, "required": ["hypothesis"]}, _no_call),
        Tool("bpe_update_progress", "Mark a subgoal as pending or done.",
             {"type": "object", "required": ["subgoal", "status"],
              "properties": {"subgoal": text, "status": {"type": "string", "enum": ["pending", "done"]}}}, _no_call),
        Tool("bpe_consolidate", "Save a lesson worth keeping for later episodes.",
             {"type": "object", "properties": {"lesson": text}, "required": ["lesson"]}, _no_call),
    ]


def initial_state(experience: Sequence[str] = (), settings: BPE | None = None) -> dict[str, Any]:
    """A fresh episode's BPE state, holding the lineage's ``experience`` lessons and, as pending
    subgoals, the harness's ``settings.progress_schema`` (the refined progress schema; none without
    ``settings``)."""
    pending = list(settings.progress_schema) if settings is not None else []
    return {"belief": [], "progress": {"done": [], "pending": pending}, "experience": list(experience),
            "consolidated": []}


def entry_key(text: str) -> str:
    """How two BPE entries (lessons, subgoals, hypotheses) are compared: case folded, whitespace
    collapsed and stripped; ``""`` for a blank one."""
    return re.sub(r"\s+", " ", text).strip().casefold()


def merge_lessons(existing: Sequence[str], new: Sequence[str], cap: int) -> list[str]:
    """Experience consolidation: ``existing`` then ``new`` lessons, blank ones dropped, duplicates
    (equal up to case and whitespace) kept once at their latest position, the newest ``cap`` kept.
    Returns the lessons oldest first. Raises ``ValueError`` when ``cap < 1``."""
    if cap < 1:
        raise ValueError(f"merge_lessons: cap must be >= 1, got {cap}")
    order: dict[str, str] = {}
    for lesson in [*existing, *new]:
        key = entry_key(lesson)
        if key:
            order.pop(key, None)
            order[key] = re.sub(r"\s+", " ", lesson).strip()
    return list(order.values())[-cap:]


def apply_action(settings: BPE, state: dict[str, Any], name: str, args: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Run harness action ``name`` (a key of ``ACTIONS``) with ``args`` on ``state``; returns the new
    state (``state`` is not changed) and the tool's reply. Entries are cut to ``settings.max_chars``
    and the lists capped (``BPE``). Raises ``ValueError`` (an observation for the model) on an empty
    entry, an unknown ``part`` or ``status``, or an unknown action."""
    new = {"belief": list(state.get("belief", [])),
           "progress": {k: list(v) for k, v in (state.get("progress") or {"done": [], "pending": []}).items()},
           "experience": list(state.get("experience", [])), "consolidated": list(state.get("consolidated", []))}
    if name == "bpe_read":
        part = args.get("part") or "all"
        if part not in PARTS:
            raise ValueError(f"part must be one of {list(PARTS)}, got {part!r}")
        return new, render_state(new, part)
    if name not in TEXT_ARGUMENT:
        raise ValueError(f"unknown harness action {name!r}; one of {sorted(ACTIONS)}")
    entry = re.sub(r"\s+", " ", str(args.get(TEXT_ARGUMENT[name]) or "")).strip()[:settings.max_chars]
    if not entry:
        raise ValueError(f"{name} needs a non-empty text")
    if name == "bpe_update_belief":
        new["belief"] = merge_lessons(new["belief"], [entry], settings.max_belief)
        return new, "belief updated"
    if name == "bpe_update_progress":
        status = args.get("status")
        if status not in ("pending", "done"):
            raise ValueError(f"status must be 'pending' or 'done', got {status!r}")
        other = "done" if status == "pending" else "pending"
        new["progress"][other] = [s for s in new["progress"][other] if entry_key(s) != entry_key(entry)]
        new["progress"][status] = merge_lessons(new["progress"][status], [entry], settings.max_progress)
        return new, f"subgoal marked {status}"
    new["experience"] = merge_lessons(new["experience"], [entry], settings.max_experience)
    new["consolidated"] = merge_lessons(new["consolidated"], [entry], settings.max_experience)
    return new, "lesson saved"


def render_state(state: dict[str, Any], part: str = "all") -> str:
    """The BPE state (or one ``part``: belief, progress, experience) as the text the model reads."""
    progress = state.get("progress") or {}
    sections = {
        "belief": ("Belief", [f"- {b}" for b in state.get("belief", [])]),
        "progress": ("Progress", [f"- [done] {s}" for s in progress.get("done", [])]
                     + [f"- [pending] {s}" for s in progress.get("pending", [])]),
        "experience": ("Experience", [f"- {e}" for e in state.get("experience", [])]),
    }
    shown = sections if part == "all" else {part: sections[part]}
    return "\n".join(f"{title}:\n" + ("\n".join(lines) if lines else "(empty)") for title, lines in shown.values())


def state_chars(state: dict[str, Any]) -> int:
    """The size of a BPE state: characters over its belief, progress and experience entries."""
    progress = state.get("progress") or {}
    entries = [*state.get("belief", []), *progress.get("done", []), *progress.get("pending", []),
               *state.get("experience", [])]
    return sum(len(e) for e in entries)


def action_record(settings: BPE, name: str, turn: int, error: str = "") -> dict[str, Any]:
    """One ``Trajectory.harness_actions`` entry: ``action`` (``ACTIONS[name]``), ``kind`` (``read`` or
    ``write``), its declared ``cost`` (charged even when the action failed: the call was made),
    the model ``turn`` (1-based) it was made in and its ``error`` (empty when it applied)."""
    action = ACTIONS[name]
    return {"action": action, "kind": "read" if name in READS else "write",
            "cost": float(getattr(settings.costs, action)), "turn": turn, "error": error}


class ExperienceStore(Protocol):
    """Where a harness lineage's experience lessons outlive its episodes (EvoHarness-RL, Experience).
    ``lineage`` is a key the caller chooses (the evoharness_rl family uses its run's start harness id)."""

    def lessons(self, lineage: str) -> list[str]:
        """The lineage's lessons, oldest first (empty for a lineage never consolidated)."""
        ...

    def consolidate(self, lineage: str, lessons: Sequence[str], cap: int, round: int = 0,
                    kept: Sequence[str] | None = None) -> list[str]:
        """Merge ``lessons`` into the lineage's (``merge_lessons``: dedup, newest ``cap`` kept) at the
        run's ``round``, or take ``kept`` as the result when a summariser already merged them
        (``coevo.meta.roles.Summariser``; capped at ``cap`` too); returns them."""
        ...


def _merged(existing: Sequence[str], new: Sequence[str], cap: int, kept: Sequence[str] | None) -> list[str]:
    """A consolidation's result: ``kept`` (a summariser's) capped, else ``merge_lessons``."""
    return merge_lessons([], kept, cap) if kept is not None else merge_lessons(existing, new, cap)


class InMemoryExperience:
    """An ``ExperienceStore`` in a dict: experience persists across the episodes and rounds of one
    process (the run), not across processes."""

    def __init__(self) -> None:
        self._lessons: dict[str, list[str]] = {}

    def lessons(self, lineage: str) -> list[str]:
        """The lineage's lessons, oldest first."""
        return list(self._lessons.get(lineage, []))

    def consolidate(self, lineage: str, lessons: Sequence[str], cap: int, round: int = 0,
                    kept: Sequence[str] | None = None) -> list[str]:
        """Merge ``lessons`` into the lineage's (``merge_lessons``; ``kept``: the result, when
        given); returns the lineage's lessons."""
        self._lessons[lineage] = _merged(self._lessons.get(lineage, []), lessons, cap, kept)
        return self.lessons(lineage)


def experience_key(start_harness: str, env: Mapping[str, Any]) -> str:
    """The experience store's key of a harness lineage: its start harness id and a digest of the env
    config it plays (``RunConfig.env``, as JSON), so runs of one start harness on another env config
    (whose train tasks may be this config's val or test tasks) never share lessons."""
    digest = hashlib.sha256(json.dumps(dict(env), sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"{start_harness}@env-{digest}"


class ArchiveExperience:
    """An ``ExperienceStore`` in the archive (``coevo.records.ExperienceRecord``, table ``experience``):
    every consolidation adds the lineage's next version, so experience persists across episodes,
    rounds, processes and runs that share a start harness, and its history (the harness evolution)
    stays readable. Reaches the archive only through its generic ``get``/``list``/``put`` (no SQL).
    ``run_id`` is recorded with each version. Two processes consolidating one lineage at once write
    the same version id: the later write replaces the earlier (last writer wins)."""

    def __init__(self, archive: Any, run_id: str | None = None) -> None:
        self.archive, self.run_id = archive, run_id

    def history(self, lineage: str) -> list[Any]:
        """The lineage's ``ExperienceRecord`` versions, oldest first."""
        from coevo.records.experience import ExperienceRecord

        return sorted(self.archive.list(ExperienceRecord, lineage=lineage), key=lambda r: r.version)

    def lessons(self, lineage: str) -> list[str]:
        """The lessons of the lineage's latest version, oldest first (empty when never consolidated)."""
        versions = self.history(lineage)
        return list(versions[-1].lessons) if versions else []

    def consolidate(self, lineage: str, lessons: Sequence[str], cap: int, round: int = 0,
                    kept: Sequence[str] | None = None) -> list[str]:
        """Merge ``lessons`` into the latest version's (``merge_lessons``; ``kept``: the result, when
        given) and store the result as the next version (also when nothing changed: a version per
        consolidation; ``offered``: ``lessons``); returns its lessons."""
        from coevo.records.experience import ExperienceRecord

        versions = self.history(lineage)
        kept = _merged(versions[-1].lessons if versions else [], lessons, cap, kept)
        version = versions[-1].version + 1 if versions else 1
        self.archive.put(ExperienceRecord(lineage=lineage, version=version, round=round, lessons=kept,
                                          offered=list(lessons), run_id=self.run_id))
        return kept
