"""``models.base.areply``: the same reply as ``ainvoke``; the direct ``_agenerate`` path only when
nothing observes the call (callback handlers, cache, streaming), so traces and Studio streaming
still see every model call."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.caches import InMemoryCache
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda

from coevo.models.base import TOKENS_KEY, areply
from coevo.models.fake import ScriptedChatModel

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
