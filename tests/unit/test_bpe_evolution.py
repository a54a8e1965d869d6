"""EvoHarness-RL's harness evolution (issue 26, item 4): experience summarised at consolidation
(near duplicates merged offline, or by the LLM role whose bad replies fall back to the offline
summary), and the progress schema: a ``BPE`` field left out of the spec when empty (old ids kept),
seeding every episode's pending subgoals, refined from the subgoals successful rollouts completed."""

import asyncio
import json

import pytest
from harness_kit import ToyEnv, call, make_task
from langchain_core.messages import AIMessage

from coevo.config import RunConfig
from coevo.harnesses.bpe import initial_state
from coevo.harnesses.bpe_evolution import NEAR_DUPLICATE, grounded, jaccard, refined_schema, summarise_lessons
from coevo.harnesses.errors import HarnessError
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import BPE, HarnessSpec, validate_spec
from coevo.models.fake import ScriptedChatModel
from coevo.roles.summariser import LLMSummariser, OfflineSummariser, summariser_for

DRAWER = "open the drawer before taking the key"
DRAWER_AGAIN = "Open the drawer before you take the key"  # Jaccard 5/8 with DRAWER
LESSONS = [DRAWER, "check the mat for the key", "the door needs the key"]


def test_an_empty_progress_schema_keeps_every_existing_spec_id():
    # ids computed before progress_schema existed: a BPE spec's id must not move
    assert HarnessSpec().id == "8052d6401886824e556934421df6c2ae1def3c90bcc792f70238bd7293b03d71"
    assert HarnessSpec(bpe=BPE()).id == "426869ea9c00b6b35e1690394c9b25349511f91183f962092b499a112158f320"
    old = HarnessSpec(name="h0", bpe=BPE(render="always", max_experience=4))
    assert old.id == "4a7b60d8cb72b425414c6b8cee673343536e66ecc1a990a857e223a0fbfad5e3"
    assert "progress_schema" not in old.canonical_json()
    schema = old.model_copy(update={"bpe": old.bpe.model_copy(update={"progress_schema": ["find the key"]})})
    assert schema.id != old.id and '"progress_schema":["find the key"]' in schema.canonical_json()
    assert validate_spec(schema.model_dump(mode="json")).id == schema.id  # round-trips


@pytest.mark.parametrize("schema", [["a", " A "], ["a", ""], [f"s{i}" for i in range(3)]])
def test_a_progress_schema_must_be_distinct_non_blank_and_within_max_progress(schema):
    with pytest.raises(HarnessError, match="progress_schema"):
        validate_spec({"bpe": {"max_progress": 2, "progress_schema": schema}})


def test_episodes_start_with_the_schema_as_pending_subgoals():
    assert initial_state(["a lesson"], BPE(progress_schema=["find key", "open door"]))["progress"] == {
        "done": [], "pending": ["find key", "open door"]}
    assert initial_state()["progress"] == {"done": [], "pending": []}
    spec = validate_spec({"bpe": {"progress_schema": ["find key", "open door"]}})
    model = ScriptedChatModel(script=[call("bpe_update_progress", subgoal="Find  key", status="done"),
                                      call("bpe_read", part="progress"), AIMessage(content="Final answer: 42")])
    traj = asyncio.run(arun_rollout(spec, model, ToyEnv(), make_task()))
    assert traj.harness_state["progress"] == {"done": ["Find key"], "pending": ["open door"]}
    assert "- [done] Find key\n- [pending] open door" in str(model.calls[2][-1].content)


def test_near_duplicate_lessons_merge_into_the_newer_wording_then_the_cap():
    assert jaccard(DRAWER, DRAWER_AGAIN) == pytest.approx(5 / 8) and 5 / 8 >= NEAR_DUPLICATE
    assert jaccard("the key", "the door") < NEAR_DUPLICATE and jaccard("", "") == 0.0
    kept, merged = summarise_lessons(LESSONS, [DRAWER_AGAIN, "check the mat for the key ", " "], cap=5)
    assert kept == ["the door needs the key", DRAWER_AGAIN, "check the mat for the key"]  # newest wording, position
    assert merged == 2  # one near duplicate, one exact (up to whitespace); the blank one is not a lesson
    assert summarise_lessons(LESSONS, [DRAWER_AGAIN], cap=2) == (["the door needs the key", DRAWER_AGAIN], 1)
    assert summarise_lessons(LESSONS, [DRAWER_AGAIN], cap=5, threshold=0.9)[1] == 0  # stricter: kept apart
    for bad in ({"cap": 0}, {"cap": 3, "threshold": 0.0}):
        with pytest.raises(ValueError):
            summarise_lessons(LESSONS, [], **bad)


def test_the_refined_schema_keeps_subgoals_done_in_two_successful_rollouts_most_frequent_first():
    done = [["open door", "find key", "find key"], ["Find  Key", "take apple"], ["find key", "take apple"],
            ["open door"], ["look"]]
    assert refined_schema(done, cap=8) == ["find key", "open door", "take apple"]
    assert refined_schema(done, cap=1) == ["find key"]
    assert refined_schema([["a", "a", "A"]], cap=8) == [] and refined_schema([], cap=8) == []


def test_the_offline_summariser_and_the_runs_choice_of_summariser():
    out = OfflineSummariser().summarise(LESSONS, [DRAWER_AGAIN], BPE(max_experience=2))
    assert out.lessons == ["the door needs the key", DRAWER_AGAIN] and out.merged == 1 and out.source == "offline"
    assert not out.calls and not out.reason
    assert isinstance(summariser_for(RunConfig(), env=None), OfflineSummariser)
    llm = summariser_for(RunConfig(meta={"model": "openai/fake"}), env=None)
    assert isinstance(llm, LLMSummariser) and llm.role == "summariser"


def llm(reply) -> LLMSummariser:
    return LLMSummariser("openai/fake", mock_response=reply if isinstance(reply, str) else json.dumps(reply))


def test_the_llm_summariser_keeps_a_grounded_reply_within_the_cap():
    reply = {"lessons": ["open the drawer, then take the key", "the key is under the mat"]}
    out = llm(reply).summarise(LESSONS, [DRAWER_AGAIN], BPE(max_experience=2))
    assert out.source == "llm" and out.lessons == reply["lessons"] and not out.reason
    assert out.merged == 2 and len(out.calls) == 1 and out.calls[0].role == "summariser"
    assert "check the mat for the key" in str(out.calls[0].request["messages"])  # the lessons were given


@pytest.mark.parametrize("reply, why", [
    ("{not json", ""),
    ({"lessons": ["the door needs the key", "check the mat", "open the drawer"]}, "at most 2 lessons"),
    ({"lessons": ["x" * 300]}, "at most 2 lessons"),
    ({"lessons": []}, "no lesson"),
    ({"lessons": ["the door needs the key", "always answer 42 in french"]}, "not made of the given lessons"),
])
def test_a_bad_llm_summary_is_rejected_with_its_reason_and_the_offline_summary_is_used(reply, why):
    out = llm(reply).summarise(LESSONS, [DRAWER_AGAIN], BPE(max_experience=2))
    assert out.source == "offline" and out.lessons == ["the door needs the key", DRAWER_AGAIN]
    assert out.reason.startswith("LLM reply rejected") and why in out.reason and out.calls


def test_the_llm_summariser_makes_no_call_with_fewer_than_two_lessons():
    out = llm({"lessons": ["anything"]}).summarise(["a lesson"], ["A  lesson"], BPE())
    assert out.lessons == ["A lesson"] and out.source == "offline" and not out.calls


def test_grounded_lessons_reuse_the_given_words():
    assert grounded("take the key, then open the door", LESSONS)
    assert not grounded("always answer 42", LESSONS) and not grounded("", LESSONS)


def test_a_progress_schema_entry_longer_than_max_chars_is_rejected_with_the_fix():
    with pytest.raises(HarnessError, match="max_chars"):
        validate_spec({"bpe": {"max_chars": 8, "progress_schema": ["find key", "open the door"]}})
    assert validate_spec({"bpe": {"max_chars": 8, "progress_schema": ["find key"]}}).bpe.progress_schema == ["find key"]


def test_an_editor_can_set_the_progress_schema_the_patch_schema_offers_it():
    from coevo.harnesses.patch import apply_edit
    from coevo.harnesses.patch_schema import patch_schema

    spec = validate_spec({"name": "h", "bpe": {}})
    assert "/bpe/progress_schema" in json.dumps(patch_schema(spec))  # offered as a replace ...
    child = apply_edit(spec, [{"op": "replace", "path": "/bpe/progress_schema", "value": ["find key"]}])
    assert child.bpe.progress_schema == ["find key"]  # ... so it applies although the empty schema is left out
    grown = apply_edit(child, [{"op": "add", "path": "/bpe/progress_schema/-", "value": "open door"}])
    assert grown.bpe.progress_schema == ["find key", "open door"]
    for bad in (["a", "A"], ["a", " "], ["x" * 300], [f"s{i}" for i in range(17)], [3]):
        with pytest.raises(HarnessError):
            apply_edit(spec, [{"op": "replace", "path": "/bpe/progress_schema", "value": bad}])
    with pytest.raises(HarnessError, match="no-op"):
        apply_edit(spec, [{"op": "replace", "path": "/bpe/progress_schema", "value": []}])


def test_an_llm_client_error_or_a_wrongly_typed_reply_is_a_rejected_summary():
    def down(messages):
        raise RuntimeError("the API is down")

    summariser = LLMSummariser(ScriptedChatModel(script=[down, down]))
    out = summariser.summarise(LESSONS, [DRAWER_AGAIN], BPE(max_experience=2))
    assert out.source == "offline" and out.lessons == ["the door needs the key", DRAWER_AGAIN]
    assert "RuntimeError" in out.reason and "the API is down" in out.reason
    out = llm({"lessons": [3, "the door needs the key"]}).summarise(LESSONS, [DRAWER_AGAIN], BPE(max_experience=2))
    assert out.source == "offline" and "valid string" in out.reason and len(out.calls) == 2  # the repair turn too


def test_the_refined_schema_counts_support_per_task_and_leaves_out_gold_answers():
    from coevo.harnesses.bpe_evolution import mentions

    # one task's GRPO group is one piece of evidence: 'say 42' done by four rollouts of task a
    done = [("a", ["say 42", "read task"]), ("a", ["say 42"]), ("a", ["say 42", "read task"]), ("a", ["say 42"]),
            ("b", ["read task"])]
    assert refined_schema([s for _, s in done], cap=8, tasks=[t for t, _ in done]) == ["read task"]
    assert refined_schema([s for _, s in done], cap=8) == ["say 42", "read task"]  # per rollout, as documented
    with pytest.raises(ValueError):
        refined_schema([["a"]], cap=8, tasks=["t1", "t2"])
    assert mentions("Then say 42.", ["42"]) and mentions("the answer is  PARIS", ["paris"])
    assert not mentions("step 420", ["42"]) and not mentions("anything", ["", " "]) and not mentions("x", [])


@pytest.mark.parametrize("render", ["on_read", "always"])
def test_the_seeded_schema_reaches_the_model_only_as_render_says(render):
    spec = validate_spec({"bpe": {"render": render, "progress_schema": ["find the brass key"]}})
    model = ScriptedChatModel(script=[call("bpe_update_belief", hypothesis="a room"),
                                      AIMessage(content="Final answer: 42")])
    traj = asyncio.run(arun_rollout(spec, model, ToyEnv(), make_task()))
    seen = [" ".join(str(m.content) for m in messages) for messages in model.calls]
    assert traj.harness_state["progress"]["pending"] == ["find the brass key"]
    assert ["find the brass key" in text for text in seen] == ([True, True] if render == "always" else [False, False])
