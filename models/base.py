"""How a chat model hands coevo its tokens, and how a call becomes a ``ModelCall``.

Every policy is a LangChain ``BaseChatModel``. A model that knows its tokens (the local
transformers backend, a vLLM server asked for logprobs) puts them in the reply's
``response_metadata[TOKENS_KEY]`` as ``{"prompt_token_ids": [...], "completion_token_ids": [...],
"logprobs": [...]}``; usage goes in the standard ``usage_metadata``; a LiteLLM cost goes in
``response_metadata["cost_usd"]``.
"""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.callbacks import AsyncCallbackManager
from langchain_core.globals import get_llm_cache
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, messages_to_dict
from langchain_core.runnables import Runnable, ensure_config
from langchain_core.utils.uuid import uuid7

from coevo.models.trajectory import ModelCall

TOKENS_KEY = "coevo_tokens"
_CALL_ONLY = ("ls_structured_output_format", "structured_output_format")  # for LangChain's tracer, not the model


def record_call(inputs: Sequence[BaseMessage], reply: AIMessage, latency_s: float = 0.0) -> ModelCall:
    """Build the ``ModelCall`` record of one model call.

    Args: ``inputs`` the messages sent; ``reply`` the model's ``AIMessage``; ``latency_s`` wall
    seconds. Token ids and logprobs are copied from ``reply.response_metadata[TOKENS_KEY]`` when
    present; token counts fall back to their lengths when ``usage_metadata`` is missing.
    """
    meta: dict[str, Any] = reply.response_metadata or {}
    tokens: dict[str, Any] = meta.get(TOKENS_KEY) or {}
    usage = reply.usage_metadata or {}
    prompt_ids = tokens.get("prompt_token_ids")
    completion_ids = tokens.get("completion_token_ids")
    return ModelCall(
        input=messages_to_dict(list(inputs)),
        output=messages_to_dict([reply])[0],
        prompt_token_ids=prompt_ids,
        completion_token_ids=completion_ids,
        logprobs=tokens.get("logprobs"),
        input_tokens=int(usage.get("input_tokens") or len(prompt_ids or [])),
        output_tokens=int(usage.get("output_tokens") or len(completion_ids or [])),
        cost_usd=float(meta.get("cost_usd") or 0.0),
        latency_s=latency_s,
    )


def _unobserved(model: BaseChatModel, messages: list[BaseMessage], kwargs: dict[str, Any]) -> bool:
    """True when ``model.ainvoke`` would attach no callback handler (none in the run config, on the
    model, from LangSmith tracing or a configure hook), use no cache or rate limiter, not stream,
    and pass ``messages`` on unchanged (all plain-text content: list content is normalised first)."""
    if model.cache not in (None, False) or model.rate_limiter is not None or model.output_version == "v1":
        return False
    if any(not isinstance(m.content, str) for m in messages):
        return False
    if kwargs.get("stream") or getattr(model, "streaming", False) is True:
        return False
    if model.cache is None and get_llm_cache() is not None:
        return False
    config = ensure_config()
    manager = AsyncCallbackManager.configure(config.get("callbacks"), model.callbacks, model.verbose,
                                             config.get("tags"), model.tags, config.get("metadata"), model.metadata)
    return not manager.handlers


async def areply(model: Runnable, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
    """The model's reply to ``messages``: what ``await model.ainvoke(messages, **kwargs)`` returns.

    For a LangChain ``BaseChatModel`` that nothing observes (``_unobserved``: no callback handlers,
    cache, rate limiter or streaming) this calls the model's ``_agenerate`` directly and applies
    the same response-metadata merge as ``BaseChatModel._agenerate_with_cache``: the same reply,
    without ``ainvoke``'s per-call callback-manager set-up and the ``asyncio.gather`` task it
    wraps every call in. That task costs two event-loop hops per call, each queued behind every
    other ready rollout: at 32 concurrent rollouts of a 50 ms model it cost ~11 points of engine
    throughput (``benchmarks/README.md``, row (a)). Anything else goes through ``ainvoke``
    (so LangSmith traces, ``astream_events`` and Studio streaming still see every call).
    A reply without an ``id`` gets one, as under ``ainvoke`` (``lc_run--<uuid7>-0``), so the
    recorded call and the state hold the same message (the archive's prefix sharing needs it);
    the structured-output kwargs ``ainvoke`` keeps for its tracer are dropped, as it drops them.
    Raises whatever the model raises.
    """
    if not isinstance(model, BaseChatModel) or not _unobserved(model, messages, kwargs):
        return await model.ainvoke(messages, **kwargs)
    for key in _CALL_ONLY:
        kwargs.pop(key, None)
    stop = kwargs.pop("stop", None)
    result = await model._agenerate(messages, stop=stop, **kwargs)
    generation = result.generations[0]
    message = generation.message
    info = {k: v for k, v in (generation.generation_info or {}).items() if k != "lc_gateway_metadata"}
    llm_output = result.llm_output if len(result.generations) == 1 and result.llm_output else {}
    message.response_metadata = {**llm_output, **info, **message.response_metadata}
    if message.id is None:
        message.id = f"lc_run--{uuid7()}-0"
    return message  # type: ignore[return-value]
