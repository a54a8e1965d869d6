"""The rollout engine: concurrent rollouts keep their own tools; fast tools stay on the event loop;
recorded calls share prefixes; the policy's wrappers survive tool binding; each call has its own
seed. (``arun_state``'s equivalence with the compiled graph is in ``test_compat.py``.)"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from harness_kit import ToyEnv, call, make_task, toy_tools
from langchain_core.messages import AIMessage

from coevo.compat import arun_state
from coevo.envs.base import Episode, Tool
from coevo.harnesses import HarnessSpec, load_harness
from coevo.harnesses.engine import call_seed
from coevo.harnesses.runtime import (
    EngineContext,
    arun_rollout,
    build_harness_graph,
    graph,
    recursion_limit,
    to_trajectory,
)
from coevo.models.fake import ScriptedChatModel
from coevo.storage import codec


async def run_loop(harness: HarnessSpec, policy: Any, episode: Episode, seed: int = 0) -> dict:
    """What ``arun_rollout`` runs: the graph's nodes in ``arun_state``'s plain loop."""
    return await arun_state(graph, EngineContext(harness, policy, episode, seed), {"task": "Find it."},
                            recursion_limit(harness))


async def test_concurrent_rollouts_keep_their_own_tools():
    spec = load_harness({})

    def episode(value: str) -> Episode:
        return Episode(task=make_task(),
                       tools=[Tool("get", "Get.", {"type": "object", "properties": {}}, lambda: value)])

    def reply(messages):
        from langchain_core.messages import ToolMessage
        seen = [m for m in messages if isinstance(m, ToolMessage)]
        return f"Final answer: {seen[-1].content}" if seen else call("get")

    graphs = [build_harness_graph(spec, ScriptedChatModel(script=[reply], latency_s=0.01), episode(v))
              for v in "abcdefgh"]
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
    bound = build_harness_graph(load_harness({}),
                                ScriptedChatModel(script=[call("fast"), call("slow"), "Final answer: 1"]),
                                Episode(task=make_task(), tools=tools))
    out = await bound.ainvoke({})
    assert out["answer"] == "1"
    assert threads["fast"] == threading.get_ident() and threads["slow"] != threading.get_ident()


async def test_each_recorded_call_extends_the_previous_one_message_for_message():
    """Call i's input starts with call i-1's input and reply, ids included (the reply is recorded
    with the id it keeps in the state): the archive stores each call as a tail on that prefix."""
    harness = load_harness({})
    script = [call("lookup", key="k"), call("search", query="q"), "Final answer: 42"]
    state = await run_loop(harness, ScriptedChatModel(script=script, with_tokens=True),
                           Episode(task=make_task(), tools=toy_tools()))
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
    state = await run_loop(harness, policy, Episode(task=make_task(), tools=toy_tools()))
    assert state["answer"] == "1" and len(stops) == 2
    assert stops == ([["\n\n"]] * 2 if wrap == "bind(stop)" else [None, None])


class SeedRecorder(ScriptedChatModel):
    """A scripted model that records the ``seed`` of every call (sync and async)."""

    seeds: list[Any] = []

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.seeds.append(kwargs.get("seed"))
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.seeds.append(kwargs.get("seed"))
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


RETRY_ON_VIOLATION = {"parser": {"mode": "text", "on_no_action": "violation"},
                      "hooks": {"again": {"event": "after_model", "condition": "unparsed_reply", "action": "retry"}},
                      "decoding": {"temperature": 1.0}, "budget": {"max_model_calls": 4}}


@pytest.mark.parametrize("engine", ["invoke", "ainvoke", "arun_state"])
async def test_each_model_call_samples_with_its_own_reproducible_seed(engine):
    """Issue 17 item 4: a retry after an interface violation must not repeat the reply's seed."""
    harness = load_harness(RETRY_ON_VIOLATION)

    async def seeds(seed: int) -> list[Any]:
        model = SeedRecorder(script=["hmm", "hmm", "hmm", "Final answer: 1"], seeds=[])
        episode = Episode(task=make_task(), tools=[])
        if engine == "arun_state":
            await run_loop(harness, model, episode, seed)
        else:
            bound = build_harness_graph(harness, model, episode, seed)
            await bound.ainvoke({}) if engine == "ainvoke" else bound.invoke({})
        return model.seeds

    first = await seeds(7)
    assert first == [call_seed(7, i) for i in range(4)]
    assert len(set(first)) == 4, "every call, retries included, samples with a different seed"
    assert await seeds(7) == first, "the same rollout seed replays the same seeds"
    assert set(await seeds(8)).isdisjoint(first)


def test_a_seed_in_the_spec_replaces_the_rollout_seed():
    model = SeedRecorder(script=["Final answer: 1"], seeds=[])
    build_harness_graph(load_harness({"decoding": {"seed": 11}}), model, Episode(task=make_task()), seed=3).invoke({})
    assert model.seeds == [call_seed(11, 0)]


async def test_timr_counts_a_turn_with_two_violations_once():
    """TIMR (CoEvo-RSI): the fraction of model turns with at least one interface violation."""
    two_bad_calls = AIMessage("", tool_calls=[{"name": "nope", "args": {}, "id": "c1"},
                                              {"name": "lookup", "args": {}, "id": "c2"}])  # unknown tool; missing key
    model = ScriptedChatModel(script=[two_bad_calls, call("lookup", key="k"), "hmm", "Final answer: 42"])
    spec = load_harness({"parser": {"on_no_action": "violation"}})
    traj = await arun_rollout(spec, model, ToyEnv(), make_task())
    assert (traj.model_turns, traj.interface_violations, traj.violation_turns) == (4, 3, 2)
    assert traj.timr == 0.5


async def test_with_tracing_on_a_rollout_runs_the_compiled_graph_to_the_same_trajectory(monkeypatch):
    import coevo.harnesses.runtime as harness_graph

    spec, script = load_harness({}), [call("lookup", key="k"), "Final answer: 42"]
    plain = await arun_rollout(spec, ScriptedChatModel(script=script), ToyEnv(), make_task(), seed=2)

    async def no_plain_loop(*args: Any) -> None:
        raise AssertionError("tracing is on: the rollout must run through the compiled graph")

    monkeypatch.setattr(harness_graph, "tracing_is_enabled", lambda: True)
    monkeypatch.setattr(harness_graph, "arun_state", no_plain_loop)
    traced = await arun_rollout(spec, ScriptedChatModel(script=script), ToyEnv(), make_task(), seed=2)
    keep = {"final_answer", "stop_reason", "model_turns", "env_actions", "reward", "violation_turns"}
    assert traced.model_dump(include=keep) == plain.model_dump(include=keep) and traced.passed
