"""``RecordingChatModel``: the chat model a user's agent graph is handed, recording every call it makes.

A user's LangGraph agent (``coevo.harnesses.agent``) calls its model as any LangChain chat model
(``invoke``/``ainvoke``, ``bind_tools``); this wrapper passes each call to the policy with coevo's
decoding settings (the harness's ``decoding`` and output-token budget, a per-call seed) and records
it as a ``ModelCall`` — input messages, reply, and the prompt and sampled token ids and logprobs the
policy returned (``coevo.models.base.TOKENS_KEY``). Those records become the rollout's
``Trajectory.calls``, so the loss mask is the engine's (``Trajectory.segments``: only the sampled
completion tokens carry loss; the graph's own messages — system prompt, injected turns, tool
observations — are prompt tokens with mask 0; Harness-S §7, Eq. 15).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field

from coevo.compat import areply
from coevo.errors import CoevoError
from coevo.models.base import record_call
from coevo.models.trajectory import ModelCall

__all__ = ["CallBudgetSpent", "RecordingChatModel"]


class CallBudgetSpent(CoevoError, RuntimeError):
    """The agent asked for more model calls than its harness budget allows (``budget.max_model_calls``):
    the rollout ends there with ``stop_reason`` ``budget:model_calls``."""


class RecordingChatModel(BaseChatModel):
    """Wraps ``policy`` (any chat model or runnable taking messages); every call is recorded in ``calls``.

    ``decoding``: keyword arguments every call is made with (``temperature``, ``top_p``,
    ``max_tokens``, ``stop``); a caller's own arguments (e.g. bound ``tools``) are added, but
    coevo's decoding wins so training samples as the harness says. ``seed_of(i)``: the sampling seed
    of call ``i`` (0-based; None: no seed). ``max_calls``: the call budget; the call past it raises
    ``CallBudgetSpent`` before reaching the policy. ``error``: the last exception the policy raised
    (re-raised as it is), so a caller can tell the model's failure from the graph's. ``bind_tools``
    binds OpenAI-style tool schemas that reach the policy as ``tools=`` (a local model renders them
    into its chat template). ``keep_calls=False`` keeps no record (an exported agent serving requests,
    ``coevo.app.release``: the wrapper only applies the decoding; ``seed_of`` and ``max_calls`` then
    see every call as call 0).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    policy: Any
    decoding: dict[str, Any] = Field(default_factory=dict)
    seed_of: Callable[[int], int] | None = None
    max_calls: int | None = None
    calls: list[ModelCall] = Field(default_factory=list)
    error: Exception | None = None
    keep_calls: bool = True

    @property
    def _llm_type(self) -> str:
        return "coevo-recording"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Runnable:
        """This model with ``tools`` (LangChain tools, functions or schemas) bound as OpenAI-style schemas."""
        bound = {"tools": [convert_to_openai_tool(t) for t in tools], **kwargs}
        if tool_choice is not None:
            bound["tool_choice"] = tool_choice
        return self.bind(**bound)

    def _arguments(self, stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        index = len(self.calls)
        if self.max_calls is not None and index >= self.max_calls:
            raise CallBudgetSpent(f"the agent's model-call budget of {self.max_calls} is spent")
        args = {**kwargs, **({"stop": stop} if stop else {}), **self.decoding}
        if self.seed_of is not None:
            args["seed"] = self.seed_of(index)
        return args

    def _record(self, messages: list[BaseMessage], reply: AIMessage, started: float, seed: int | None) -> ChatResult:
        if self.keep_calls:
            self.calls.append(record_call(messages, reply, time.perf_counter() - started, seed))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        args, started = self._arguments(stop, kwargs), time.perf_counter()
        try:
            reply = self.policy.invoke(messages, **args)
        except Exception as err:
            self.error = err
            raise
        return self._record(messages, reply, started, args.get("seed"))

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        args, started = self._arguments(stop, kwargs), time.perf_counter()
        try:
            reply = await areply(self.policy, messages, **args)
        except Exception as err:
            self.error = err
            raise
        return self._record(messages, reply, started, args.get("seed"))
