"""RouterChatModel: one policy on several servers; spread, cooldown, retry on a healthy one (no network:
each server's call is replaced by a function of its api_base)."""

from __future__ import annotations

import asyncio
import logging

import litellm
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from coevo.models.litellm_model import LiteLLMCallError, LiteLLMChatModel
from coevo.models.refs import load_model
from coevo.models.router import RouterChatModel, ServerPool

DEAD = "http://dead/v1"


@pytest.fixture
def servers(monkeypatch):
    """Healthy servers answer their own api_base after 10 ms; DEAD refuses the connection; every
    attempt is logged in ``calls`` as (api_base, start, end)."""
    calls: list[str] = []

    async def acomplete(self, messages, stop=None, **kwargs):
        calls.append(self.api_base)
        await asyncio.sleep(0.01)
        if self.api_base == DEAD:
            cause = litellm.APIConnectionError("Connection refused", llm_provider="openai", model=self.model)
            raise LiteLLMCallError("connection refused", 1) from cause
        if self.api_base == "http://bad/v1":
            cause = litellm.BadRequestError("bad request", llm_provider="openai", model=self.model)
            raise LiteLLMCallError("bad request", 1) from cause
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.api_base))])

    monkeypatch.setattr(LiteLLMChatModel, "acomplete", acomplete)
    return calls


def router(*bases: str, cooldown_s: float = 30.0) -> RouterChatModel:
    return load_model("litellm:openai/policy?api_base=" + ",".join(bases) + f"&cooldown_s={cooldown_s}")


async def test_concurrent_calls_spread_and_a_dead_server_gets_one_attempt_per_cooldown(servers, caplog):
    model = router("http://a/v1", "http://b/v1", DEAD, cooldown_s=0.3)
    with caplog.at_level(logging.WARNING, logger="coevo.models.router"):
        replies = []
        for _ in range(3):  # three waves of 16 concurrent calls, each wave inside one cooldown window
            replies += await asyncio.gather(*(model.ainvoke([HumanMessage("hi")]) for _ in range(16)))
            await asyncio.sleep(0.35)
    assert len(replies) == 48 and {r.content for r in replies} == {"http://a/v1", "http://b/v1"}
    assert servers.count("http://a/v1") >= 16 and servers.count("http://b/v1") >= 16
    assert servers.count(DEAD) == 3  # one probe per window, never a burst
    assert model.pool.servers[2].failures == 3 and model.pool.servers[2].successes == 0
    assert sum("server http://dead/v1 failed (APIConnectionError" in r.message for r in caplog.records) == 3


async def test_every_server_dead_fails_with_the_last_error(servers):
    model = RouterChatModel(servers=[LiteLLMChatModel(model="openai/policy", api_base=DEAD)], cooldown_s=0.01)
    with pytest.raises(LiteLLMCallError, match="every server of 'openai/policy' failed") as err:
        await model.ainvoke([HumanMessage("hi")])
    assert isinstance(err.value.__cause__, litellm.APIConnectionError) and servers.count(DEAD) == 3


async def test_a_permanent_error_is_raised_at_once_without_cooling_the_server(servers):
    model = router("http://bad/v1", "http://a/v1")
    with pytest.raises(LiteLLMCallError, match="bad request"):
        await model.ainvoke([HumanMessage("hi")])
    assert model.pool.servers[0].cooled_until == 0.0 and servers == ["http://bad/v1"]


def test_sync_invoke_and_bound_copies_share_the_breakers(servers):
    model = router("http://a/v1", DEAD)
    tooled = model.bind_tools([{"type": "function", "function": {"name": "f", "parameters": {}}}])
    assert tooled.pool is model.pool and all(s.tools for s in tooled.servers)
    assert model.invoke([HumanMessage("hi")]).content == "http://a/v1"
    assert tooled.invoke([HumanMessage("hi")]).content == "http://a/v1"
    assert servers.count(DEAD) <= 1


def test_pool_probes_unproven_servers_once_and_prefers_the_least_busy():
    pool = ServerPool(["a", "b"], cooldown_s=60)
    assert {pool.acquire(set()), pool.acquire(set())} == {0, 1}
    assert pool.acquire(set()) is None  # both probing: nobody else until a probe answers
    pool.release(0, None)
    assert [pool.acquire(set()) for _ in range(3)] == [0, 0, 0]  # a proven server takes any number
    assert pool.release(1, litellm.Timeout("slow", model="m", llm_provider="openai")) is True
    assert pool.acquire({0}) == 0  # b cools down: the request goes back to a, even though it failed there
