"""No-op edits (issue 27's leftover): a patch whose child is its parent (same spec id) is a rejected
candidate with the reason ``NOOP`` in every strategy that edits (the shared ``realise`` behind edit,
revision, search and inheritance), never a crash and never a child stored as its own parent; the LLM
editor gets its one repair for it; the public ``apply_patch`` still applies it."""

from __future__ import annotations

import asyncio
import json

import pytest
from test_equal_spend import family_context
from test_meta_loop import _run, setup_run

from coevo.harnesses import HarnessError, HarnessSpec, apply_patch
from coevo.harnesses.patch import NOOP, apply_edit
from coevo.meta.roles import Proposal
from coevo.meta.state import Candidate, Direction
from coevo.models.fake import ScriptedChatModel
from coevo.records import EditRecord, HarnessRecord
from coevo.roles.editor import LLMEditor
from coevo.strategies import STRATEGIES


def same(spec: HarnessSpec) -> list[dict]:
    """A patch that leaves ``spec`` as it is: its name replaced by itself."""
    return [{"op": "replace", "path": "/name", "value": spec.name}]


def test_apply_edit_rejects_a_patch_that_leaves_the_harness_unchanged():
    spec = HarnessSpec(name="h", prompt={"system": "Answer."})
    there_and_back = [{"op": "add", "path": "/prompt/rules/x", "value": {"text": "r"}},
                      {"op": "remove", "path": "/prompt/rules/x"}]
    for patch in (same(spec), there_and_back, [{"op": "replace", "path": "/prompt/system", "value": "Answer."}]):
        with pytest.raises(HarnessError, match=NOOP):
            apply_edit(spec, patch)
        assert apply_patch(spec, patch).id == spec.id  # the public API applies it as it is
    changed = apply_edit(spec, [{"op": "replace", "path": "/prompt/system", "value": "Answer briefly."}])
    assert changed.id != spec.id and changed.parents == [spec.id]
    with pytest.raises(HarnessError, match="does not apply"):  # the other problems are still reported
        apply_edit(spec, [{"op": "replace", "path": "/nope", "value": 1}])


class NoOpEditor:
    """An editor (and its revisions) whose every patch is a no-op of the harness it is shown."""

    def propose(self, direction, spec, tasks, solved=(), *, round=0, sample=0, allowed=None):
        return Proposal(candidate=Candidate(id=f"{spec.short_id}-{direction.id}-s{sample}", direction=direction.id,
                                            parent_id=spec.id, patch=same(spec), rationale="nothing"))

    def revise(self, direction, spec, candidate, feedback, tasks):
        cand = candidate.model_copy(update={"status": "proposed", "reason": "", "revision": candidate.revision + 1,
                                            "spec_id": None, "patch": same(spec)})
        return Proposal(candidate=cand)


class NoOpProposer:
    """A Meta-Harness proposer whose every candidate is a no-op of the best archived harness."""

    def propose(self, view, m, iteration):
        parent = view.spec(view.entries[0].harness_id)
        return [Proposal(candidate=Candidate(id=f"i{iteration}-{i}", direction="noop", parent_id=parent.id,
                                             patch=same(parent))) for i in range(m)]


EDITING = [s for s, row in STRATEGIES.items() if {"editor", "proposer", "engineer"} & set(row.roles)]


@pytest.mark.parametrize("strategy", EDITING)
def test_a_no_op_patch_is_a_rejected_candidate_in_every_strategy_that_edits(tmp_path, strategy):
    config, ctx, archive = family_context(tmp_path, strategy, 0)
    ctx.editor, ctx.proposer = NoOpEditor(), NoOpProposer()
    state = asyncio.run(_run(config, ctx, archive))  # no exception escapes the run
    edits = archive.list(EditRecord, run_id="run-1")
    assert edits, f"{strategy} proposed nothing: the test did not reach the shared edit path"
    assert all(e.status == "rejected" and NOOP in e.reason for e in edits)
    assert all(e.child_id is None for e in edits)
    assert not any(d.accepted for d in state.get("decisions", []))
    harnesses = archive.list(HarnessRecord, run_id="run-1")
    assert all(h.id not in (h.parents or []) for h in harnesses)  # no harness stored as its own child
    assert [h.parents for h in harnesses if h.origin == "base"] == [[]]


def test_the_llm_editor_repairs_a_no_op_reply_and_is_rejected_with_the_reason_if_it_persists(tmp_path):
    spec = HarnessSpec(name="h0", prompt={"system": "Answer the task."})
    direction = Direction(id="d0", cause="wrong", description="x", task_ids=["a"])
    noop = json.dumps({"rationale": "keep it", "patch": same(spec)})
    fix = json.dumps({"rationale": "be brief", "patch": [{"op": "replace", "path": "/prompt/system",
                                                          "value": "Be brief."}]})
    repaired = LLMEditor(ScriptedChatModel(script=[noop, fix])).propose(direction, spec, {})
    assert repaired.candidate.status == "proposed" and repaired.candidate.patch[0]["value"] == "Be brief."
    assert NOOP in json.dumps(repaired.calls[1].request)  # the repair was told why
    stuck = LLMEditor(ScriptedChatModel(script=[noop, noop])).propose(direction, spec, {})
    assert stuck.candidate.status == "rejected" and NOOP in stuck.candidate.reason

    config, ctx, archive = setup_run(tmp_path, "help", editor=LLMEditor(ScriptedChatModel(script=[noop])))
    state = asyncio.run(_run(config, ctx, archive))
    assert not state["decisions"]
    assert all(e.status == "rejected" and NOOP in e.reason for e in archive.list(EditRecord, run_id="run-1"))


def test_an_edit_that_leaves_a_user_agents_params_unchanged_is_a_no_op():
    from coevo.harnesses.agent import agent_harness, load_agent

    spec = agent_harness("agent_kit:make_system_agent", HarnessSpec())
    unseen = [{"op": "add", "path": "/prompt/rules/x", "value": {"text": "Be brief."}}]  # not in SystemOnly
    assert apply_patch(spec, unseen).id != spec.id  # the spec changes ...
    agent = load_agent(spec.agent)
    assert agent.params(apply_patch(spec, unseen)) == agent.params(spec)  # ... what the app receives does not
    with pytest.raises(HarnessError, match=NOOP):
        apply_edit(spec, unseen)
    seen = apply_edit(spec, [{"op": "replace", "path": "/prompt/system", "value": "You are Acme's terse assistant."}])
    assert agent.params(seen).prompt.system == "You are Acme's terse assistant."
