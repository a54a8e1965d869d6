"""Harness-R1's cold-start data: the archive's *accepted* edits with their evidence, as prompt/reply
pairs for supervised fine-tuning of the harness engineer (Harness-R1, arXiv:2608.02276, its
abstract: "cold-start supervised fine-tuning initializes
this editing policy").

An edit is accepted when a ``GateDecision`` of its run accepted its child harness
(``GateDecision.candidate_id == EditRecord.child_id``, ``accepted``); rejected, unchecked and
ungated edits never become examples. Its evidence is what the loop refined from: the failed *train*
trajectories of its parent harness in its run (stored under the parent or under the parent's
``sampling`` variant, ``coevo.nodes.loop.sample``), at most ``max_evidence``; the prompt is
``engineer_messages`` of the parent spec, that evidence and the edit's direction — the prompt the
engineer sees in GRPO and in use — and the reply is the patch with its rationale, in the layout the
engineer's constrained decoding writes (``coevo.models.constrained.JSON_OPTIONS``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from coevo.envs.base import Task
from coevo.harnesses.spec import validate_spec
from coevo.models.trajectory import Trajectory
from coevo.records import EditRecord, GateDecision, HarnessRecord
from coevo.training.harness_r1.edit_env import engineer_messages, failure_excerpt, train_only

OP_KEYS = ("op", "path", "value")
"""The key order of a patch operation in ``patch_schema`` (constrained decoding writes keys in it)."""


@dataclass
class EngineerExample:
    """One SFT example: the ``system`` and ``user`` prompt, the ``reply`` text, where it came from
    (``edit_id``, the accepting ``gate_id``) and the ids of the train tasks its evidence shows (``tasks``)."""

    system: str
    user: str
    reply: str
    edit_id: str
    gate_id: str
    tasks: tuple[str, ...] = ()


def reply_text(rationale: str, patch: list[dict[str, Any]]) -> str:
    """``{"rationale", "patch"}`` as the engineer's constrained decoding lays it out (", " and ": "
    separators, keys in the schema's order)."""
    ops = [{k: op[k] for k in (*OP_KEYS, *sorted(set(op) - set(OP_KEYS))) if k in op} for op in patch]
    return json.dumps({"rationale": rationale, "patch": ops}, separators=(", ", ": "), ensure_ascii=False)


def _evidence(archive: Any, run_id: str | None, parent_id: str, max_evidence: int) -> list[Trajectory]:
    """The parent's failed train trajectories in ``run_id``: under the parent itself or its sampling variants."""
    variants = [h.id for h in archive.run_harnesses(run_id)
                if h.parents == [parent_id] and h.origin == "sampling"]
    found: list[Trajectory] = []
    for harness_id in (parent_id, *variants):
        found += [t for t in archive.list(Trajectory, run_id=run_id, harness_id=harness_id, split="train")
                  if not t.passed]
    distinct = list({t.task_id: t for t in found}.values())
    return distinct[:max_evidence]


def accepted_examples(archive: Any, run_id: str | None = None, max_evidence: int = 5,
                      runs: Sequence[str] | None = None) -> list[EngineerExample]:
    """The SFT examples of every accepted edit in the archive (of run ``run_id``, or of the runs
    ``runs``, when given; module doc), oldest gate first; an accepted edit with no stored parent spec
    or no stored failed train trajectory of its parent is skipped (no evidence to condition on).
    Raises ``SplitLeakError`` should an evidence task not be a train task."""
    where = {"run_id": run_id} if run_id is not None else {}
    gates = [g for g in archive.list(GateDecision, **where) if g.accepted and (runs is None or g.run_id in runs)]
    examples: list[EngineerExample] = []
    seen: set[str] = set()
    for gate in sorted(gates, key=lambda g: g.created_at):
        edits = [e for e in archive.list(EditRecord, run_id=gate.run_id, child_id=gate.candidate_id)
                 if e.status == "checked" and e.patch]
        parent = archive.get(HarnessRecord, edits[-1].parent_id) if edits else None
        if parent is None or gate.candidate_id in seen:
            continue
        failures = _evidence(archive, gate.run_id, parent.id, max_evidence)
        tasks = train_only([t for t in (archive.get(Task, f.task_id) for f in failures) if t is not None],
                           f"the evidence of edit {edits[-1].id}")
        if not failures:
            continue
        seen.add(gate.candidate_id)
        edit = edits[-1]
        system, user = engineer_messages(validate_spec(parent.spec, parent.id), [failure_excerpt(f) for f in failures],
                                         tasks, focus=edit.direction)
        examples.append(EngineerExample(system, user, reply_text(edit.rationale, edit.patch), edit.id, gate.id,
                                        tuple(f.task_id for f in failures)))
    return examples
