"""``coevo.compat``: each reach under a framework's public API behaves like the public path it
replaces. ``areply`` gives the same reply as ``ainvoke`` and takes the direct ``_agenerate`` path only
when nothing observes the call (callback handlers, cache, streaming), so traces and Studio streaming
still see every model call; ``arun_state`` ends in the same state as the compiled graph's ``ainvoke``;
``bind_context`` gives every way of running a graph its context; ``unbind`` calls the same model with
the same kwargs as the binding and ``bind_tools_within`` keeps the wrappers ``bind_tools`` would drop.
The TRL and transformers reaches: ``test_compat_training.py``."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from harness_kit import TABLE7, call, make_task, toy_tools
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, messages_to_dict
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda

from coevo.compat import (
    areply,
    arun_state,
    bind_context,
    bind_tools_within,
    innermost,
    state_schemas,
    unbind,
    with_checkpointer,
)
from coevo.envs.base import Episode, Tool
from coevo.envs.interaction import NEXT_USER_TURN
from coevo.harnesses import load_harness
from coevo.harnesses.runtime import EngineContext, build_harness_graph, graph, recursion_limit
from coevo.models.base import TOKENS_KEY
from coevo.models.fake import ScriptedChatModel

# --- areply: the direct model call ------------------------------------------------------------

TOOL_CALL = AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": "k"}, "id": "c1"}])


class InfoModel(ScriptedChatModel):
    """A scripted model whose result also carries ``generation_info`` and ``llm_output``, which
    ``ainvoke`` merges into the reply's ``response_metadata``."""

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        message = self._next(messages).generations[0].message
        message.response_metadata["from_message"] = 1
        return ChatResult(generations=[ChatGeneration(message=message, generation_info={"finish_reason": "stop",
                                                                                           "from_message": 0})],
                          llm_output={"model_name": "info", "kwargs": sorted(kwargs)})


class Starts(AsyncCallbackHandler):
    """Counts ``on_chat_model_start`` events."""

    def __init__(self) -> None:
        self.starts = 0

    async def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.starts += 1


def _no_ainvoke(monkeypatch: pytest.MonkeyPatch, cls: type) -> None:
    async def fail(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("ainvoke was called on an unobserved model")

    monkeypatch.setattr(cls, "ainvoke", fail)


@pytest.mark.parametrize("reply", ["Final answer: 3", TOOL_CALL])
@pytest.mark.parametrize("cls", [ScriptedChatModel, InfoModel])
async def test_direct_reply_equals_ainvoke(cls: type, reply: Any) -> None:
    messages = [HumanMessage("what is 1 + 2?")]
    kwargs = {"temperature": 0.0, "max_tokens": 8, "stop": ["\n\n"]}
    slow = await cls(script=[reply], with_tokens=True).ainvoke(messages, **kwargs)
    fast = await areply(cls(script=[reply], with_tokens=True), messages, **kwargs)
    assert fast.id.startswith("lc_run--") and slow.id.startswith("lc_run--") and fast.id != slow.id
    assert UUID(fast.id.removeprefix("lc_run--")[:36]).version == 7  # time-ordered, as LangChain's run ids
    assert fast.model_dump(exclude={"id"}) == slow.model_dump(exclude={"id"})
    assert fast.response_metadata[TOKENS_KEY]["prompt_token_ids"]
    if cls is InfoModel:
        assert fast.response_metadata["finish_reason"] == "stop" and fast.response_metadata["from_message"] == 1
        assert fast.response_metadata["kwargs"] == ["max_tokens", "temperature"]  # stop goes as its own argument


async def test_structured_output_kwargs_stay_out_of_the_model_call() -> None:
    """``ainvoke`` keeps ``ls_structured_output_format`` for its tracer and never passes it to
    ``_agenerate`` (a model that rejects unknown kwargs would raise); neither does ``areply``."""
    fmt = {"schema": {"type": "object"}, "kwargs": {}}
    slow = await InfoModel(script=["{}"]).ainvoke([HumanMessage("x")], ls_structured_output_format=fmt, top_p=0.5)
    fast = await areply(InfoModel(script=["{}"]), [HumanMessage("x")], ls_structured_output_format=fmt, top_p=0.5)
    assert fast.response_metadata["kwargs"] == slow.response_metadata["kwargs"] == ["top_p"]


async def test_unobserved_model_skips_ainvoke(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_ainvoke(monkeypatch, ScriptedChatModel)
    model = ScriptedChatModel(script=["hi"])
    assert (await areply(model, [HumanMessage("x")])).content == "hi"
    assert len(model.calls) == 1


async def test_callbacks_on_the_model_see_the_call() -> None:
    handler = Starts()
    model = ScriptedChatModel(script=["hi"], callbacks=[handler])
    assert (await areply(model, [HumanMessage("x")])).content == "hi"
    assert handler.starts == 1


async def test_callbacks_in_the_run_config_see_the_call() -> None:
    """A caller running coevo inside a traced or streamed LangChain run (e.g. a graph node under
    ``astream_events``) passes its callbacks through the context: the call must reach them."""
    handler = Starts()
    model = ScriptedChatModel(script=["hi"])

    async def inner(_: Any) -> str:
        return str((await areply(model, [HumanMessage("x")])).content)

    assert await RunnableLambda(inner).ainvoke(None, {"callbacks": [handler]}) == "hi"
    assert handler.starts == 1


async def test_cache_streaming_and_list_content_go_through_ainvoke() -> None:
    cached = ScriptedChatModel(script=["first", "second"], cache=InMemoryCache())
    assert (await areply(cached, [HumanMessage("x")])).content == "first"
    assert (await areply(cached, [HumanMessage("x")])).content == "first"  # served by LangChain's cache
    assert len(cached.calls) == 1

    seen: list[dict] = []
    original = ScriptedChatModel.ainvoke

    async def spy(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return await original(self, input, config, **kwargs)

    blocks = [HumanMessage([{"type": "text", "text": "see the file"}])]  # list content: ainvoke normalises it
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ScriptedChatModel, "ainvoke", spy)
        assert (await areply(ScriptedChatModel(script=["s"]), [HumanMessage("x")], stream=True)).content == "s"
        assert (await areply(ScriptedChatModel(script=["b"]), blocks)).content == "b"
    assert seen == [{"stream": True}, {}]


async def test_non_chat_runnables_are_invoked() -> None:
    echo = RunnableLambda(lambda messages, **_: AIMessage(f"{len(messages)} messages"))
    assert (await areply(echo, [HumanMessage("a"), HumanMessage("b")])).content == "2 messages"


# --- arun_state: the plain-loop runner ------------------------------------------------------

RETRY = {"hooks": {"r": {"event": "after_model", "condition": "always", "action": "retry", "message": "again"}},
         "budget": {"max_model_calls": 3}}
SCENARIOS: dict[str, tuple[dict, list[Any]]] = {
    "tools then answer": ({}, [call("lookup", key="k"), call("search", query="q"), "Final answer: 42"]),
    "table 7 hooks": (TABLE7, [call("search", query="q"), call("boom"), "Final answer: 1"]),
    "retry hook": (RETRY, ["no", "Final answer: 1"]),
    "violations to budget": ({"parser": {"mode": "text", "on_no_action": "violation"},
                              "budget": {"max_model_calls": 3}},
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
        episode = (_conversation_episode(log) if name == "conversation"
                   else Episode(task=make_task(), tools=toy_tools(log)))
        model = ScriptedChatModel(script=script, with_tokens=True)
        harness = load_harness(spec)
        if engine == "graph":
            out = await build_harness_graph(harness, model, episode, seed=5).ainvoke({"task": "Find it."})
        else:
            out = await arun_state(graph, EngineContext(harness, model, episode, seed=5), {"task": "Find it."},
                                   recursion_limit(harness))
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
    contexts = [g.bound_context for g in (a, b)]
    assert sorted(contexts[0].tools) == ["boom", "echo", "lookup", "search"] and contexts[1].tools == {}


def test_a_graph_run_without_a_context_says_how_to_build_one():
    with pytest.raises(ValueError, match="build_harness_graph"):
        graph.invoke({"task": "Find it."})


# --- bind_context: a compiled graph that carries its run context -------------------------------


def _bound(script: list[Any]) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(script=script)
    return build_harness_graph(load_harness({}), model, Episode(task=make_task(), tools=toy_tools())), model


async def test_every_way_of_running_a_bound_graph_sees_its_context():
    script = [call("lookup", key="k"), "Final answer: 42"]
    runs = {
        "invoke": lambda g: g.invoke({}),
        "ainvoke": lambda g: g.ainvoke({}),
        "stream": lambda g: list(g.stream({}, stream_mode="values"))[-1],
        "astream_events": lambda g: _last_output(g.astream_events({}, version="v2")),
        "context={} (what Studio sends)": lambda g: g.ainvoke({}, context={}),
        "a copy (what Studio makes)": lambda g: g.copy({"checkpointer": None}).ainvoke({}),
    }
    for how, run in runs.items():
        bound, model = _bound(script)
        out = run(bound)
        out = await out if hasattr(out, "__await__") else out
        assert out["answer"] == "42" and len(model.calls) == 2, how


async def _last_output(events: Any) -> dict:
    outs = [e["data"]["output"] async for e in events if e["event"] == "on_chain_end" and not e["parent_ids"]]
    return outs[-1]


def test_a_context_passed_to_invoke_wins_over_the_bound_one():
    bound, bound_model = _bound(["Final answer: bound"])
    other = ScriptedChatModel(script=["Final answer: passed"])
    out = bound.invoke({}, context=EngineContext(load_harness({}), other, Episode(task=make_task())))
    assert out["answer"] == "passed" and bound_model.calls == [] and len(other.calls) == 1


def test_a_bound_graph_shares_the_compiled_nodes_and_shows_no_context_schema():
    bound = bind_context(graph, "ctx", name="copy")
    assert all(bound.nodes[n] is graph.nodes[n] for n in graph.nodes)
    assert bound.name == "copy" and bound.bound_context == "ctx"
    assert bound.get_context_jsonschema() is None, "Studio has nothing to set: the context is bound"
    assert bind_context(bound, "other").bound_context == "other"



def test_a_graph_given_a_checkpointer_checkpoints_and_shares_the_compiled_nodes():
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import StateGraph

    class Count(TypedDict):
        n: int

    builder = StateGraph(Count)
    builder.add_node("up", lambda state: {"n": state["n"] + 1})
    builder.set_entry_point("up")
    builder.set_finish_point("up")
    compiled = builder.compile(name="count")
    saved = with_checkpointer(compiled, InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    assert saved.invoke({"n": 1}, thread) == {"n": 2}
    assert saved.get_state(thread).values == {"n": 2}, "the copy checkpoints"
    assert compiled.checkpointer is None and saved.name == "count"
    assert all(saved.nodes[n] is compiled.nodes[n] for n in compiled.nodes)
    assert Count in state_schemas(compiled)

# --- bind_tools_within / unbind / innermost: a RunnableBinding's fields --------------------------------------

SCHEMA = {"type": "function", "function": {"name": "lookup", "description": "Look up a key.",
                                           "parameters": {"type": "object", "properties": {}}}}


class KwargsModel(ScriptedChatModel):
    """A scripted model whose reply is the sorted call kwargs it got (stop included)."""

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        reply = AIMessage(repr(sorted({**kwargs, "stop": stop}.items())))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=tools, **kwargs)


@pytest.mark.parametrize("wrap", ["bind", "with_config", "bind+with_config"])
def test_unbind_calls_the_same_model_with_the_same_kwargs(wrap):
    base = KwargsModel(script=[])
    model = {"bind": base.bind(temperature=0.5, stop=["\n"]), "with_config": base.with_config(tags=["t"]),
             "bind+with_config": base.bind(temperature=0.5).with_config(tags=["t"])}[wrap]
    target, kwargs = unbind(model)
    assert target.invoke("x", **kwargs).content == model.invoke("x").content
    assert (target is base) == (wrap == "bind") and (kwargs == {}) == (wrap != "bind")


def test_bind_tools_within_keeps_the_wrappers_and_their_kwargs():
    base = KwargsModel(script=[])
    public = base.bind(stop=["\n"]).bind_tools([SCHEMA])  # RunnableBinding forwards and drops stop
    kept = bind_tools_within(base.bind(stop=["\n"]).with_config(tags=["t"]), [SCHEMA])
    assert "'stop', None" in public.invoke("x").content  # what the reach exists for
    assert "'stop', ['\\n']" in kept.invoke("x").content and "'tools'" in kept.invoke("x").content
    assert kept.config["tags"] == ["t"]
    assert bind_tools_within(base, [SCHEMA]).invoke("x").content == base.bind_tools([SCHEMA]).invoke("x").content


def test_innermost_finds_the_chat_model_that_every_wrapper_calls():
    base = KwargsModel(script=[])
    wrapped = base.bind(stop=["\n"]).with_config(tags=["t"]).with_retry(stop_after_attempt=2)
    assert innermost(wrapped) is base and innermost(base) is base
    assert innermost(bind_tools_within(wrapped, [SCHEMA])).invoke("x").content == base.invoke("x").content
