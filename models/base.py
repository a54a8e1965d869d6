"""How a chat model hands coevo its tokens, and how a call becomes a ``ModelCall``.

Every policy is a LangChain ``BaseChatModel``. A model that knows its tokens (the local
transformers backend, a vLLM server asked for logprobs) puts them in the reply's
``response_metadata[TOKENS_KEY]`` as ``{"prompt_token_ids": [...], "completion_token_ids": [...],
"logprobs": [...]}``; a model that could not get them (a server that does not return them) puts the
reason in ``response_metadata[MISSING_TOKENS_KEY]`` instead (``ModelCall.missing_tokens``); usage
goes in the standard ``usage_metadata``; a LiteLLM cost goes in
``response_metadata["cost_usd"]``. How a reply is obtained on the hot path (``areply``) is in
``coevo.compat``.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, ContextManager, Sequence

from langchain_core.messages import AIMessage, BaseMessage, messages_to_dict

from coevo.models.trajectory import MISSING_TOKENS_KEY, ModelCall

__all__ = ["TOKENS_KEY", "MISSING_TOKENS_KEY", "batched", "record_call"]

TOKENS_KEY = "coevo_tokens"


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


def batched(policy: Any) -> ContextManager[Any]:
    """``policy.client()`` for a policy whose engine batches its clients' calls together
    (``coevo.models.local.LocalChatModel``), else a null context. A rollout that runs as a client
    from start to end has its model calls decoded together with those of the other rollouts in
    flight, turn by turn (a GRPO step's rollouts, an evaluation's concurrent tasks)."""
    client = getattr(policy, "client", None)
    return client() if callable(client) else nullcontext()
