"""An editor's patch with a malformed JSON Pointer (no leading ``/``, a URI fragment's ``#``, a bad ``~``
escape, a path that is no string) is a rejected candidate carrying its reason in every strategy that
edits, and an LLM editor's such reply gets its one repair — never an exception that ends the run."""

from __future__ import annotations

import asyncio
import json

import pytest
from test_equal_spend import family_context
from test_meta_loop import _run, setup_run

from coevo.harnesses import HarnessSpec
from coevo.meta.roles import Proposal
from coevo.meta.state import Candidate, Direction
from coevo.models.fake import ScriptedChatModel
from coevo.records import EditRecord
from coevo.roles.editor import LLMEditor
from coevo.strategies import STRATEGIES

MALFORMED = [[{"op": "replace", "path": "prompt/system", "value": "Be brief."}],
             [{"op": "add", "path": "#/prompt/rules/x", "value": {"text": "Be brief."}}],
             [{"op": "replace", "path": "/prompt/~2system", "value": "Be brief."}],
             [{"op": "move", "from": "prompt/system", "path": "/prompt/rules/x"}],
             [{"op": "replace", "path": 5, "value": "Be brief."}]]


class MalformedEditor:
    """An editor (and its revisions) whose patches each carry one malformed pointer shape in turn."""

    def __init__(self) -> None:
        self.n = 0

    def _patch(self) -> list[dict]:
        self.n += 1
        return MALFORMED[self.n % len(MALFORMED)]

    def propose(self, direction, spec, tasks, solved=(), *, round=0, sample=0, allowed=None):
        return Proposal(candidate=Candidate(id=f"{spec.short_id}-{direction.id}-s{sample}", direction=direction.id,
                                            parent_id=spec.id, patch=self._patch(), rationale="edit"))

    def revise(self, direction, spec, candidate, feedback, tasks):
        return Proposal(candidate=candidate.model_copy(update={"status": "proposed", "reason": "", "spec_id": None,
                                                               "revision": candidate.revision + 1,
                                                               "patch": self._patch()}))


class MalformedProposer:
    """A Meta-Harness proposer whose candidates carry malformed pointers."""

    def propose(self, view, m, iteration):
        parent = view.spec(view.entries[0].harness_id)
        return [Proposal(candidate=Candidate(id=f"i{iteration}-{i}", direction="bad", parent_id=parent.id,
                                             patch=MALFORMED[i % len(MALFORMED)])) for i in range(m)]


EDITING = [s for s, row in STRATEGIES.items() if {"editor", "proposer", "engineer"} & set(row.roles)]


@pytest.mark.parametrize("strategy", EDITING)
def test_a_malformed_pointer_is_a_rejected_candidate_in_every_strategy_that_edits(tmp_path, strategy):
    config, ctx, archive = family_context(tmp_path, strategy, 0)
    ctx.editor, ctx.proposer = MalformedEditor(), MalformedProposer()
    asyncio.run(_run(config, ctx, archive))  # no exception escapes the run
    edits = archive.list(EditRecord, run_id="run-1")
    assert edits, f"{strategy} proposed nothing: the test did not reach the shared edit path"
    assert all(e.status == "rejected" and e.child_id is None for e in edits)
    assert all("JSON Pointer" in e.reason or "malformed" in e.reason for e in edits), [e.reason for e in edits]


def test_the_llm_editor_repairs_a_pointer_without_its_slash_and_a_run_survives_it(tmp_path):
    spec = HarnessSpec(name="h0", prompt={"system": "Answer the task."})
    direction = Direction(id="d0", cause="wrong", description="x", task_ids=["a"])
    bad = json.dumps({"rationale": "be brief", "patch": MALFORMED[0]})
    fix = json.dumps({"rationale": "be brief", "patch": [{"op": "replace", "path": "/prompt/system",
                                                          "value": "Be brief."}]})
    repaired = LLMEditor(ScriptedChatModel(script=[bad, fix])).propose(direction, spec, {})
    assert repaired.candidate.status == "proposed" and repaired.candidate.patch[0]["path"] == "/prompt/system"
    assert "did you mean '/prompt/system'?" in json.dumps(repaired.calls[1].request)  # the repair was told how
    stuck = LLMEditor(ScriptedChatModel(script=[bad, bad])).propose(direction, spec, {})
    assert stuck.candidate.status == "rejected" and "JSON Pointer" in stuck.candidate.reason

    config, ctx, archive = setup_run(tmp_path, "help", editor=LLMEditor(ScriptedChatModel(script=[bad])))
    state = asyncio.run(_run(config, ctx, archive))  # every round runs, and the final test
    assert not state["decisions"] and "final" in state["test"]
    edits = archive.list(EditRecord, run_id="run-1")
    assert edits and all(e.status == "rejected" and "JSON Pointer" in e.reason for e in edits)
