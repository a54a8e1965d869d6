"""The harness graph: budgets, tool errors, context policy, skills, scratchpad, tool view, rollouts."""

from __future__ import annotations

import pytest
from harness_kit import ToyEnv, call, make_task, run, toy_tools
from langchain_core.messages import AIMessage

from coevo.envs.base import Episode, Tool
from coevo.harnesses import load_harness
from coevo.harnesses.runtime import EngineContext, arun_rollout, build_harness_graph
from coevo.models.fake import ScriptedChatModel
from coevo.models.trajectory import Trajectory

# --- budgets --------------------------------------------------------------------------------


def test_a_model_that_never_stops_ends_at_its_model_call_budget():
    r = run({"budget": {"max_model_calls": 5, "max_env_actions": 100}}, [call("lookup", key="k")])
    assert r.state["stop_reason"] == "budget:model_calls"
    assert r.state["model_calls"] == 5 and len(r.model.calls) == 5 and r.state["answer"] is None


def test_a_model_that_never_parses_ends_at_its_budget_with_every_violation_counted():
    spec = {"parser": {"mode": "text", "on_no_action": "violation"}, "budget": {"max_model_calls": 3}}
    r = run(spec, ["hmm"])
    assert r.state["stop_reason"] == "budget:model_calls" and r.state["violations"] == 3


def test_the_default_budget_ends_an_endless_tool_loop():
    r = run({}, [call("lookup", key="k")])
    assert r.state["stop_reason"] == "budget:env_actions" and r.state["env_actions"] == 30
    assert r.state["model_calls"] == 31


def test_the_env_action_budget_refuses_further_actions():
    r = run({"budget": {"max_env_actions": 2}}, [call("lookup", key="k")])
    assert r.state["stop_reason"] == "budget:env_actions"
    assert r.state["env_actions"] == 2 and len(r.log) == 2 and len(r.model.calls) == 3
    assert r.state["messages"][-1].content == "Not executed: the env-action budget is spent."


def test_a_prompt_over_the_context_budget_stops_before_any_model_call():
    r = run({"budget": {"max_context_tokens": 64}}, ["Final answer: 1"], prompt="x" * 300)
    assert r.state["stop_reason"] == "budget:context_tokens" and r.model.calls == []


def test_the_context_budget_drops_the_oldest_turns_first():
    spec = {"budget": {"max_context_tokens": 64}}  # 256 characters
    r = run(spec, [call("echo", text="A" * 120), call("echo", text="B" * 120), "Final answer: 1"], prompt="task")
    assert "A" * 120 in r.seen(1)
    assert "A" * 120 not in r.seen(2) and "B" * 120 in r.seen(2)
    assert r.seen(2)[:2] == [r.seen(0)[0], "task"], "the prompt is always kept"


# --- tools ----------------------------------------------------------------------------------


def test_a_tool_that_raises_becomes_an_observation_and_an_on_tool_error_event():
    spec = {"hooks": {"err": {"event": "on_tool_error", "condition": "always", "action": "warn", "message": "recover"}}}
    r = run(spec, [call("boom"), "Final answer: 1"])
    assert r.seen(1)[-2:] == ["Error: RuntimeError: disk on fire", "Warning: recover"]
    assert r.state["hook_events"] == [{"hook": "err", "event": "on_tool_error", "action": "warn"}]
    assert r.state["stop_reason"] == "final_answer" and r.state["violations"] == 0


def test_an_unknown_tool_is_an_interface_violation_and_not_an_env_action():
    r = run({}, [call("teleport", to="mars"), "Final answer: 1"])
    assert r.state["violations"] == 1 and r.state.get("env_actions", 0) == 0
    assert "unknown tool 'teleport'" in r.seen(1)[-1] and "lookup" in r.seen(1)[-1]


def test_a_missing_required_argument_is_a_violation_and_an_error_observation():
    r = run({}, [call("lookup"), "Final answer: 1"])
    assert r.state["violations"] == 1 and "missing required argument" in r.seen(1)[-1] and r.log == []


def test_tool_output_is_truncated_to_the_context_limit():
    r = run({"context": {"tool_output_chars": 20}}, [call("echo", text="0123456789" * 10), "Final answer: 1"])
    assert r.seen(1)[-1] == "01234567890123456789\n[... truncated 80 characters]"


def test_json_output_format_pretty_prints_json_tool_output():
    r = run({"tool_view": {"output_format": "json"}}, [call("echo", text='{"b": 1, "a": [2]}'), "Final answer: 1"])
    assert r.seen(1)[-1] == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}'


def test_history_window_keeps_only_the_last_turns():
    r = run({"context": {"history_turns": 1}},
            [call("echo", text="first"), call("echo", text="second"), call("echo", text="third"), "Final answer: 1"])
    assert r.seen(1)[2:] == ["", "first"]
    assert r.seen(3)[:2] == r.seen(0)[:2], "the system and task messages are always shown"
    assert r.seen(3)[2:] == ["", "third"] and "first" not in r.seen(3) and "second" not in r.seen(3)
    assert [m.type for m in r.model.calls[3]] == ["system", "human", "ai", "tool"]


# --- skills, memory -------------------------------------------------------------------------


def test_skills_are_shown_when_always_on_or_retrieved():
    skills = {"fixed": {"text": "SKILL-ALWAYS"},
              "kw": {"text": "SKILL-KEYWORD", "mode": "retrieved", "keywords": ["invoice"]},
              "ov": {"text": "refund policy window days", "mode": "retrieved", "min_overlap": 0.3},
              "no": {"text": "SKILL-NEVER", "mode": "retrieved", "keywords": ["garden"]}}
    system = run({"skills": skills, "memory": {"lessons": ["LESSON-1"]}}, ["Final answer: 1"],
                 prompt="Check the invoice refund policy window days").seen(0)[0]
    for shown in ("SKILL-ALWAYS", "SKILL-KEYWORD", "refund policy window days", "LESSON-1"):
        assert shown in system
    assert "SKILL-NEVER" not in system
    other = run({"skills": skills}, ["Final answer: 1"], prompt="Plan a trip").seen(0)[0]
    assert "SKILL-ALWAYS" in other and "SKILL-KEYWORD" not in other and "refund" not in other


def test_the_scratchpad_note_tool_keeps_notes_visible_without_spending_env_actions():
    r = run({"memory": {"scratchpad": True}},
            [call("note", text="x = 3"), call("lookup", key="k"), call("note", text="y = 4"), "Final answer: 7"])
    assert r.seen(1)[-2:] == ["noted", "Scratchpad:\n- x = 3"]
    assert r.seen(3)[-1] == "Scratchpad:\n- x = 3\n- y = 4"
    assert r.state["scratchpad"] == ["x = 3", "y = 4"] and r.state["env_actions"] == 1
    assert r.log == [("lookup", {"key": "k"})]


def test_without_scratchpad_there_is_no_note_tool():
    r = run({}, [call("note", text="x"), "Final answer: 1"])
    assert r.state["violations"] == 1 and "unknown tool 'note'" in r.seen(1)[-1]


# --- tool view ------------------------------------------------------------------------------


VIEW = {"exposed": ["search", "lookup"], "renames": {"search": "find"}, "descriptions": {"search": "Find records."}}


def test_the_model_sees_the_renamed_tool_with_its_new_description():
    context = EngineContext(load_harness({"tool_view": VIEW}), ScriptedChatModel(script=["x"]),
                            Episode(task=make_task(), tools=toy_tools()))
    shown = {s["function"]["name"]: s["function"]["description"] for s in context.schemas}
    assert shown == {"find": "Find records.", "lookup": "Look a key up."}
    system = run({"tool_view": VIEW, "parser": {"mode": "json"}}, ["Final answer: 1"]).seen(0)[0]
    assert '"name": "find"' in system and "Find records." in system
    assert '"name": "search"' not in system and '"name": "echo"' not in system


def test_calling_the_renamed_tool_runs_the_env_tool_and_old_or_hidden_names_are_unknown():
    r = run({"tool_view": VIEW}, [call("find", query="q"), call("search", query="q"), call("echo", text="t"),
                                  "Final answer: 1"])
    assert r.log == [("search", {"query": "q"})]
    assert r.seen(1)[-1].startswith("page 1 of 3")
    assert "unknown tool 'search'" in r.seen(2)[-1] and "unknown tool 'echo'" in r.seen(3)[-1]
    assert r.state["violations"] == 2


def test_tool_is_sees_the_shown_name():
    hook = {"event": "after_tool", "condition": "tool_is", "parameters": {"name": "find"}, "action": "inject",
            "message": "FOUND"}
    r = run({"tool_view": VIEW, "hooks": {"h": hook}}, [call("find", query="q"), "Final answer: 1"])
    assert r.seen(1)[-1] == "FOUND"


# --- invoke, ainvoke, rollouts --------------------------------------------------------------


def graph_and_model(script):
    model = ScriptedChatModel(script=script)
    return build_harness_graph(load_harness({}), model, Episode(task=make_task(), tools=toy_tools())), model


def test_graph_invoke_works():
    graph, _ = graph_and_model([call("lookup", key="k"), "Final answer: 42"])
    out = graph.invoke({"task": "What is the key?"})
    assert out["answer"] == "42" and out["stop_reason"] == "final_answer"
    assert out["messages"][1].content == "What is the key?"


async def test_graph_ainvoke_works():
    graph, model = graph_and_model([call("lookup", key="k"), "Final answer: 42"])
    out = await graph.ainvoke({})
    assert out["answer"] == "42" and out["model_calls"] == 2 and len(out["calls"]) == 2
    assert model.calls[0][1].content == make_task().prompt, "the task defaults to the episode's task"


async def test_arun_rollout_returns_a_scored_trajectory_and_closes_the_episode():
    env = ToyEnv()
    spec = load_harness({"hooks": {"w": {"event": "after_tool", "condition": "always", "action": "warn",
                                         "message": "m"}}})
    model = ScriptedChatModel(script=[call("lookup", key="k"), "Final answer: 42"], with_tokens=True)
    traj = await arun_rollout(spec, model, env, make_task(), seed=3, checkpoint_id="ck1", split="val")
    assert isinstance(traj, Trajectory)
    assert (traj.reward, traj.passed, traj.score_detail) == (1.0, True, {"got": "42"})
    assert (traj.harness_id, traj.checkpoint_id, traj.seed, traj.split) == (spec.id, "ck1", 3, "val")
    assert (traj.final_answer, traj.stop_reason, traj.model_turns, traj.env_actions) == ("42", "final_answer", 2, 1)
    assert traj.hook_events == [{"hook": "w", "event": "after_tool", "action": "warn"}]
    assert len(traj.calls) == 2 and traj.calls[1].completion_token_ids == [ord(c) for c in "Final answer: 42"]
    assert traj.input_tokens > 0 and traj.latency_s > 0 and env.closed == 1


async def test_arun_rollout_scores_a_failure_and_closes_the_episode_when_the_model_raises():
    env = ToyEnv()
    traj = await arun_rollout(load_harness({}), ScriptedChatModel(script=["Final answer: 41"]), env, make_task())
    assert (traj.reward, traj.passed, traj.split) == (0.0, False, "train")

    def explode(messages):
        raise ConnectionError("network down")

    with pytest.raises(ConnectionError):
        await arun_rollout(load_harness({}), ScriptedChatModel(script=[explode]), env, make_task())
    assert env.closed == 2


def test_tools_returning_non_strings_are_serialised():
    tool = Tool("add", "Add.", {"type": "object", "properties": {}}, lambda a, b: {"sum": a + b})
    r = run({}, [call("add", a=1, b=2), AIMessage(content="Final answer: 3")], tools=[tool])
    assert r.seen(1)[-1] == '{"sum": 3}'


def test_a_choice_action_in_native_mode_is_observed_as_text_not_as_an_orphan_tool_result():
    # A numbered reply has no native tool call, so its result must not be a role-"tool" message (an
    # OpenAI-compatible API rejects a tool result with no tool call before it); native calls keep theirs.
    r = run({"parser": {"mode": "native", "choice_action": "lookup.key"}},
            ["2", call("echo", text="t"), "Final answer: 1"])
    assert r.log == [("lookup", {"key": "2"}), ("echo", {"text": "t"})]
    called = {c["id"] for m in r.state["messages"] if m.type == "ai" for c in m.tool_calls}
    tool_ids = [m.tool_call_id for m in r.state["messages"] if m.type == "tool"]
    assert tool_ids == ["call_echo"] and set(tool_ids) <= called
    assert "value of 2" in r.seen_text(1) and r.state["answer"] == "1"
