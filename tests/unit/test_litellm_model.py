"""LiteLLMChatModel with LiteLLM's mock responses: retries, give-up, timeouts, cost, tool calls, tokens."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
import pytest  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402

from coevo.envs.base import Tool  # noqa: E402
from coevo.models.base import TOKENS_KEY, record_call  # noqa: E402
from coevo.models.litellm_model import LiteLLMCallError, LiteLLMChatModel, is_transient  # noqa: E402
from coevo.models.messages import messages_to_openai  # noqa: E402
from coevo.models.trajectory import MISSING_TOKENS_KEY, MissingTokensError, Trajectory  # noqa: E402
from coevo.training.grpo.samples import trajectory_rows  # noqa: E402

MODEL = "openai/gpt-4o-mini"


def rate_limit() -> Exception:
    return litellm.RateLimitError("slow down", llm_provider="openai", model="gpt-4o-mini")


def flaky(monkeypatch, name: str, failures: list[Exception]) -> list[dict]:
    """Patch ``litellm.<name>`` to raise ``failures`` in order, then answer with a mock reply."""
    real = getattr(litellm, name)
    calls: list[dict] = []

    def fake(**kwargs):
        calls.append(kwargs)
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        return real(**kwargs, mock_response="recovered")

    async def afake(**kwargs):
        calls.append(kwargs)
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        return await real(**kwargs, mock_response="recovered")

    monkeypatch.setattr(litellm, name, afake if name == "acompletion" else fake)
    return calls


def fast(**kwargs) -> LiteLLMChatModel:
    return LiteLLMChatModel(model=MODEL, backoff_s=0.001, backoff_max_s=0.002, **kwargs)


def test_cost_and_usage_are_accounted_for_a_priced_model():
    reply = fast().invoke([HumanMessage("hi")], mock_response="hello")
    assert reply.content == "hello"
    assert reply.response_metadata["cost_usd"] > 0
    assert reply.usage_metadata["input_tokens"] > 0 and reply.usage_metadata["output_tokens"] > 0
    call = record_call([HumanMessage("hi")], reply)
    assert call.cost_usd == reply.response_metadata["cost_usd"]
    assert TOKENS_KEY not in reply.response_metadata  # OpenAI returns no token ids


def test_unpriced_server_models_cost_zero():
    reply = LiteLLMChatModel(model="hosted_vllm/my-lora", api_base="http://localhost:9").invoke(
        [HumanMessage("hi")], mock_response="ok")
    assert reply.response_metadata["cost_usd"] == 0.0


def test_sync_rate_limits_are_retried_then_succeed(monkeypatch):
    calls = flaky(monkeypatch, "completion", [rate_limit(), rate_limit()])
    reply = fast(max_retries=3).invoke([HumanMessage("hi")])
    assert reply.content == "recovered" and len(calls) == 3


async def test_async_server_errors_are_retried_then_succeed(monkeypatch):
    err = litellm.InternalServerError("boom", llm_provider="openai", model="gpt-4o-mini")
    calls = flaky(monkeypatch, "acompletion", [err, rate_limit()])
    reply = await fast(max_retries=2).ainvoke([HumanMessage("hi")])
    assert reply.content == "recovered" and len(calls) == 3


async def test_gives_up_after_max_retries_with_a_clear_error(monkeypatch):
    calls = flaky(monkeypatch, "acompletion", [rate_limit()] * 10)
    with pytest.raises(LiteLLMCallError, match="gave up after 3 attempts") as info:
        await fast(max_retries=2).ainvoke([HumanMessage("hi")])
    assert len(calls) == 3 and info.value.attempts == 3
    assert isinstance(info.value.__cause__, litellm.RateLimitError)


def test_rate_limit_from_mock_response_is_retried_until_give_up():
    with pytest.raises(LiteLLMCallError, match="RateLimitError.*gave up after 2 attempts"):
        fast(max_retries=1).invoke([HumanMessage("hi")], mock_response=rate_limit())


def test_bad_request_is_not_retried(monkeypatch):
    bad = litellm.BadRequestError("bad field", llm_provider="openai", model="gpt-4o-mini")
    calls = flaky(monkeypatch, "completion", [bad, bad])
    with pytest.raises(LiteLLMCallError, match="permanent BadRequestError"):
        fast(max_retries=5).invoke([HumanMessage("hi")])
    assert len(calls) == 1


async def test_a_slow_reply_times_out_and_is_retried():
    with pytest.raises(LiteLLMCallError, match="Timeout.*gave up after 2 attempts"):
        await fast(max_retries=1, timeout_s=0.05).ainvoke([HumanMessage("hi")], mock_response="late", mock_delay=2.0)


def test_litellm_timeouts_are_transient():
    with pytest.raises(LiteLLMCallError, match="Timeout.*gave up after 2 attempts"):
        fast(max_retries=1, timeout_s=0.05).invoke([HumanMessage("hi")], mock_timeout=True)
    assert is_transient(litellm.APIConnectionError("down", llm_provider="openai", model="m"))
    assert not is_transient(litellm.AuthenticationError("no key", llm_provider="openai", model="m"))


def test_tool_calls_are_mapped_and_tools_are_sent():
    tool = Tool("add", "Add.", {"type": "object", "properties": {"a": {"type": "integer"}}}, lambda a: a)
    bound = fast().bind_tools([tool], tool_choice="auto")
    assert isinstance(bound, LiteLLMChatModel)
    params = bound._params([HumanMessage("x")], None, {})
    assert params["tools"][0]["function"]["name"] == "add" and params["tool_choice"] == "auto"
    reply = bound.invoke([HumanMessage("add one")], mock_tool_calls=[
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}},
        {"id": "c2", "type": "function", "function": {"name": "add", "arguments": "{not json"}}])
    assert reply.tool_calls == [{"name": "add", "args": {"a": 1}, "id": "c1", "type": "tool_call"}]
    assert reply.invalid_tool_calls[0]["id"] == "c2"


def test_decoding_settings_and_call_overrides_reach_litellm():
    model = fast(temperature=0.7, max_tokens=64, seed=3)
    params = model._params([HumanMessage("x")], ["STOP"], {"temperature": 0.0})
    assert params["temperature"] == 0.0 and params["max_tokens"] == 64 and params["seed"] == 3
    assert params["stop"] == ["STOP"] and params["max_retries"] == 0 and params["timeout"] == model.timeout_s
    assert params["drop_params"] is True  # a provider without `seed` must not fail the harness's calls


def test_vllm_models_ask_for_token_ids_and_parse_them():
    model = LiteLLMChatModel(model="hosted_vllm/policy", api_base="http://localhost:8000/v1")
    params = model._params([HumanMessage("x")], None, {})
    assert params["logprobs"] is True and params["extra_body"]["return_tokens_as_token_ids"] is True
    response = litellm.ModelResponse(
        choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi!"},
                  "logprobs": {"content": [{"token": "token_id:17", "logprob": -0.25, "top_logprobs": []},
                                           {"token": "token_id:4", "logprob": -1.5, "top_logprobs": []}]}}],
        usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7})
    reply = model._result(response).generations[0].message
    assert reply.response_metadata[TOKENS_KEY]["completion_token_ids"] == [17, 4]
    assert reply.response_metadata[TOKENS_KEY]["logprobs"] == [-0.25, -1.5]
    assert MISSING_TOKENS_KEY not in reply.response_metadata
    call = record_call([HumanMessage("x")], reply)
    assert call.missing_tokens is None and Trajectory(task_id="t", calls=[call]).missing_tokens is None


def test_a_self_hosted_reply_is_priced_at_zero_without_printing(capsys):
    from coevo.models.litellm_model import response_cost

    def reply(model):
        return litellm.ModelResponse(model=model, usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
                                     choices=[{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": "hi"}}])

    assert response_cost(reply("coevo-r0-step0-0123456789ab")) == 0.0 and litellm.suppress_debug_info is False
    assert capsys.readouterr().out == ""  # LiteLLM's "Provider List" banner would go to stdout on every call
    assert response_cost(reply("gpt-4o-mini")) > 0


def test_a_server_without_token_ids_is_recorded_so_and_training_refuses_its_trajectories():
    model = fast(api_base="http://127.0.0.1:8000/v1")
    reply = model.invoke([HumanMessage("hi")], mock_response="[f(x=1)]")
    assert "returned no token ids or logprobs" in reply.response_metadata[MISSING_TOKENS_KEY]
    call = record_call([HumanMessage("hi")], reply)
    traj = Trajectory(task_id="t1", calls=[call], reward=1.0, passed=True)
    assert call.completion_token_ids is None and traj.missing_tokens.startswith("openai/gpt-4o-mini at http://127")
    assert traj.segments() == []
    with pytest.raises(MissingTokensError, match="task t1.*GRPO and RSFT train on the sampled tokens"):
        trajectory_rows(traj, 1.0, 0)
    assert trajectory_rows(Trajectory(task_id="t2"), 1.0, 0) == []  # a rollout that failed before any call


def test_messages_keep_tool_call_structure():
    out = messages_to_openai([HumanMessage("q"), AIMessage("", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c"}]),
                              ToolMessage("3", tool_call_id="c")])
    assert out[1]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"x": 1}'}
    assert out[2] == {"role": "tool", "content": "3", "tool_call_id": "c"}


def test_structured_output_goes_through_a_forced_tool_call():
    from pydantic import BaseModel

    class Verdict(BaseModel):
        accept: bool
        reason: str

    structured = fast().with_structured_output(Verdict)
    verdict = structured.invoke([HumanMessage("judge")], mock_tool_calls=[
        {"id": "c1", "type": "function",
         "function": {"name": "Verdict", "arguments": '{"accept": true, "reason": "fine"}'}}])
    assert verdict == Verdict(accept=True, reason="fine")
    bound = fast().bind_tools([Verdict], tool_choice="any")
    assert bound.model_kwargs["tool_choice"] == "required"
    named = fast().bind_tools([Verdict], tool_choice="Verdict")
    assert named.model_kwargs["tool_choice"] == {"type": "function", "function": {"name": "Verdict"}}
