"""The rollout engine: ``arun_state`` (used by ``arun_rollout``) ends in the same state as the compiled
graph; the compiled graph is cached and bound per episode; fast tools stay on the event loop."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from harness_kit import TABLE7, call, make_task, toy_tools
from langchain_core.messages import messages_to_dict

from coevo.envs.base import Episode, Tool
from coevo.envs.interaction import NEXT_USER_TURN
from coevo.graphs.harness import HarnessRunner, arun_state, build_harness_graph, to_trajectory
from coevo.harnesses import load_harness
from coevo.models.fake import ScriptedChatModel
from coevo.storage import codec

RETRY = {"hooks": {"r": {"event": "after_model", "condition": "always", "action": "retry", "message": "again"}},
         "budget": {"max_model_calls": 3}}
SCENARIOS: dict[str, tuple[dict, list[Any]]] = {
    "tools then answer": ({}, [call("lookup", key="k"), call("search", query="q"), "Final answer: 42"]),
    "table 7 hooks": (TABLE7, [call("search", query="q"), call("boom"), "Final answer: 1"]),
    "retry hook": (RETRY, ["no", "Final answer: 1"]),
    "violations to budget": ({"parser": {"mode": "text", "on_no_action": "violation"}, "budget": {"max_model_calls": 3}},
                             ["hmm"]),
    "env-action budget": ({"budget": {"max_env_actions": 2}}, [call("lookup", key="k")]),
    "json parser + scratchpad": ({"parser": {"mode": "json"}, "memory": {"scratchpad": True}},
                                 ['{"name": "note", "arguments": {"text": "n1"}}', "Final answer: 7"]),
    "context budget": ({"budget": {"max_context_tokens": 64}},
                       [call("echo", text="A" * 120), call("echo", text="B" * 120), "Final answer: 1"]),
}


def _plain(value: Any) -> Any:
    """Drop what differs between two equal runs: message ids (uuid4) and latencies."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in ("id", "latency_s")}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _comparable(state: dict) -> dict:
    return _plain({**state, "messages": messages_to_dict(state["messages"])})


def _conversation_episode(log: list) -> Episode:
    """Two user turns; the second reveals an extra tool (as BFCL multi_turn does)."""
    episode = Episode(task=make_task(), tools=toy_tools(log))
    turns = iter(["Now echo 'hi' too."])

    def next_turn(reply: str | None) -> str | None:
        follow = next(turns, None)
        if follow is not None:
            episode.tools.append(Tool("shout", "Shout.", {"type": "object", "properties": {}}, lambda: "HI"))
        return follow

    episode.state[NEXT_USER_TURN] = next_turn
    return episode


@pytest.mark.parametrize("name", [*SCENARIOS, "conversation"])
async def test_arun_state_ends_in_the_graph_s_final_state(name):
    spec, script = SCENARIOS.get(name, ({}, ["Final answer: 1", call("shout"), "Final answer: 2"]))
    outs, logs, seen = [], [], []
    for engine in ("graph", "direct"):
        log: list = []
        episode = _conversation_episode(log) if name == "conversation" else Episode(task=make_task(), tools=toy_tools(log))
        model = ScriptedChatModel(script=script, with_tokens=True)
        harness = load_harness(spec)
        if engine == "graph":
            out = await build_harness_graph(harness, model, episode, seed=5).ainvoke({"task": "Find it."})
        else:
            out = await arun_state(harness, HarnessRunner(harness, model, episode, seed=5), {"task": "Find it."})
        outs.append(_comparable(out))
        logs.append(log)
        seen.append([_plain(messages_to_dict(c)) for c in model.calls])
    assert outs[0] == outs[1]
    assert logs[0] == logs[1] and seen[0] == seen[1]
    assert outs[0]["stop_reason"] and outs[0]["model_calls"] >= 1


def test_the_graph_is_compiled_once_and_bound_to_each_episode():
    spec = load_harness({})
    a = build_harness_graph(spec, ScriptedChatModel(script=["x"]), Episode(task=make_task(), tools=toy_tools()))
    b = build_harness_graph(spec, ScriptedChatModel(script=["y"]), Episode(task=make_task(), tools=[]))
    assert all(a.nodes[n] is b.nodes[n] for n in a.nodes), "the compiled state machine is shared"
    runners = [g.config["configurable"]["coevo_runner"] for g in (a, b)]
    assert sorted(runners[0].tools) == ["boom", "echo", "lookup", "search"] and runners[1].tools == {}


async def test_concurrent_rollouts_keep_their_own_tools():
    spec = load_harness({})

    def episode(value: str) -> Episode:
        return Episode(task=make_task(), tools=[Tool("get", "Get.", {"type": "object", "properties": {}}, lambda: value)])

    def reply(messages):
        from langchain_core.messages import ToolMessage
        seen = [m for m in messages if isinstance(m, ToolMessage)]
        return f"Final answer: {seen[-1].content}" if seen else call("get")

    graphs = [build_harness_graph(spec, ScriptedChatModel(script=[reply], latency_s=0.01), episode(v)) for v in "abcdefgh"]
    outs = await asyncio.gather(*(g.ainvoke({}) for g in graphs))
    assert [o["answer"] for o in outs] == list("abcdefgh")


async def test_fast_tools_run_on_the_event_loop_and_blocking_tools_in_a_thread():
    threads: dict[str, int] = {}

    def record(name: str):
        def fn() -> str:
            threads[name] = threading.get_ident()
            return "ok"
        return fn

    empty = {"type": "object", "properties": {}}
    tools = [Tool("fast", "Fast.", empty, record("fast")), Tool("slow", "Slow.", empty, record("slow"), blocking=True)]
    graph = build_harness_graph(load_harness({}), ScriptedChatModel(script=[call("fast"), call("slow"), "Final answer: 1"]),
                                Episode(task=make_task(), tools=tools))
    out = await graph.ainvoke({})
    assert out["answer"] == "1"
    assert threads["fast"] == threading.get_ident() and threads["slow"] != threading.get_ident()


def test_a_graph_run_without_a_runner_says_how_to_build_one():
    graph = build_harness_graph(load_harness({}), ScriptedChatModel(script=["Final answer: 1"]),
                                Episode(task=make_task()))
    with pytest.raises(ValueError, match="build_harness_graph"):
        graph.invoke({}, {"configurable": {"coevo_runner": None}})


async def test_each_recorded_call_extends_the_previous_one_message_for_message():
    """Call i's input starts with call i-1's input and reply, ids included (the reply is recorded
    with the id it keeps in the state): the archive stores each call as a tail on that prefix."""
    harness = load_harness({})
    runner = HarnessRunner(harness, ScriptedChatModel(script=SCENARIOS["tools then answer"][1], with_tokens=True),
                           Episode(task=make_task(), tools=toy_tools()))
    state = await arun_state(harness, runner, {"task": "Find it."})
    traj = to_trajectory(state, make_task(), harness)
    assert len(traj.calls) == 3 and all(c.output["data"]["id"] for c in traj.calls)
    for prev, call_ in zip(traj.calls, traj.calls[1:]):
        assert call_.input[:len(prev.input) + 1] == prev.input + [prev.output]
    body = json.loads(codec.encode(traj))
    assert [c["input_ref"] for c in body["calls"]] == [0] + [len(p.input) + 1 for p in traj.calls[:-1]]
    assert codec.decode(codec.encode(traj)) == traj


@pytest.mark.parametrize("wrap", ["bind(stop)", "with_config(tags)", "with_retry"])
async def test_native_tools_keep_the_policy_s_wrappers(wrap):
    """A policy passed as ``model.bind(stop=...)``, ``with_config`` or ``with_retry`` keeps its
    binding when the harness binds the episode's tools (LangChain's ``RunnableBinding`` would forward
    ``bind_tools`` to the inner model and drop it)."""
    stops: list[Any] = []

    class Recording(ScriptedChatModel):
        async def _agenerate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            stops.append(stop)
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    inner = Recording(script=[call("lookup", key="k"), "Final answer: 1"])
    policy = {"bind(stop)": lambda m: m.bind(stop=["\n\n"]), "with_config(tags)": lambda m: m.with_config(tags=["t"]),
              "with_retry": lambda m: m.with_retry(stop_after_attempt=2)}[wrap](inner)
    harness = load_harness({})
    state = await arun_state(harness, HarnessRunner(harness, policy, Episode(task=make_task(), tools=toy_tools())),
                             {"task": "Find it."})
    assert state["answer"] == "1" and len(stops) == 2
    assert stops == ([["\n\n"]] * 2 if wrap == "bind(stop)" else [None, None])
