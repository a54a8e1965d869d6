"""A scripted fake chat model for tests: replies come from a list or a function, never a network.

It can also fake token ids (one id per character, with a simple chat template) so tests can
check the loss mask of ``Trajectory.segments`` without a tokenizer.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field

from coevo.models.base import TOKENS_KEY

Reply = str | AIMessage | Callable[[list[BaseMessage]], "str | AIMessage"]


def char_tokens(text: str) -> list[int]:
    """Fake tokenizer: one id per character (its code point)."""
    return [ord(c) for c in text]


def fake_template(messages: Sequence[BaseMessage]) -> str:
    """Fake chat template: ``<|role|>content`` per message, then ``<|assistant|>``."""
    return "".join(f"<|{m.type}|>{m.content}" for m in messages) + "<|ai|>"


class ScriptedChatModel(BaseChatModel):
    """Replies from ``script`` in order (the last one repeats when the script runs out).

    Each entry is a string, an ``AIMessage`` (e.g. with ``tool_calls``) or a function of the
    input messages. ``latency_s`` adds a fixed delay per call (``asyncio.sleep`` when async);
    ``with_tokens`` attaches fake prompt/completion token ids and logprobs (-0.5 each).
    ``calls`` records every input list received, ``call_kwargs`` each call's keyword arguments (seed,
    ``response_format``, ...: a scripted reply ignores them).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    latency_s: float = 0.0
    with_tokens: bool = False
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    call_kwargs: list[dict[str, Any]] = Field(default_factory=list)
    cursor: int = 0

    @property
    def _llm_type(self) -> str:
        return "coevo-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        """Tools are accepted and ignored: the script decides the replies."""
        return self

    def _next(self, messages: list[BaseMessage]) -> ChatResult:
        self.calls.append(list(messages))
        if not self.script:
            raise ValueError("ScriptedChatModel has an empty script: pass script=[...] replies")
        entry = self.script[min(self.cursor, len(self.script) - 1)]
        self.cursor += 1
        reply = entry(messages) if callable(entry) else entry
        message = AIMessage(content=reply) if isinstance(reply, str) else reply.model_copy(deep=True)
        if self.with_tokens:
            prompt = char_tokens(fake_template(messages))
            completion = char_tokens(str(message.content))
            message.response_metadata[TOKENS_KEY] = {
                "prompt_token_ids": prompt,
                "completion_token_ids": completion,
                "logprobs": [-0.5] * len(completion),
            }
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            time.sleep(self.latency_s)
        self.call_kwargs.append(dict(kwargs))
        return self._next(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        self.call_kwargs.append(dict(kwargs))
        return self._next(messages)
