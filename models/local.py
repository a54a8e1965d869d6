"""Local transformers policy as a LangChain chat model (docs/design.md, Models).

``LocalChatModel`` is the ``BaseChatModel`` face of a ``LocalEngine``
(``coevo.models.local_engine``: batching, LoRA adapters, per-row sampling): it renders the chat
template (passing bound tool schemas through ``tools=``), honours stop strings, ``max_tokens``,
``temperature``/``top_p``/``seed``, and returns an ``AIMessage`` whose
``response_metadata[TOKENS_KEY]`` holds ``prompt_token_ids``, ``completion_token_ids`` and
``logprobs`` (see ``coevo.models.base``). Hermes/Qwen ``<tool_call>`` blocks in a reply become
``AIMessage.tool_calls`` when tools are bound (``coevo.models.messages.parse_tool_calls``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ContextManager, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field

from coevo.models.base import TOKENS_KEY
from coevo.models.local_engine import LocalEngine
from coevo.models.messages import parse_tool_calls, tool_schema
from coevo.models.sampling import GenerationRequest, GenerationResult
from coevo.models.structured import schema_of


class LocalChatModel(BaseChatModel):
    """A LangChain chat model served by a ``LocalEngine`` (batched, LoRA, token ids + logprobs).

    Fields are the default decoding settings; ``invoke``/``bind`` keyword arguments
    (``temperature``, ``top_p``, ``seed``, ``max_tokens``, ``stop``, ``tools``) override them per
    call. ``response_format`` (OpenAI's shape, ``coevo.models.structured``) with a JSON schema makes
    the engine decode the reply under that schema (``coevo.models.constrained``): it parses unless
    ``max_tokens`` cut it; a schema the engine cannot decode under raises ``ValueError`` at the call.
    ``temperature == 0`` is greedy. ``adapter`` is an adapter name on the engine (from
    ``engine.add_adapter(path)``; ``None``: the engine's active adapter). Several
    ``LocalChatModel`` may share one engine (``bind_tools`` returns a copy that does), with
    different adapters; their concurrent requests batch together.

    Build with ``LocalChatModel.from_pretrained(path, adapter=...)`` or
    ``LocalChatModel.from_model(model, tokenizer)`` for objects already in memory.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: LocalEngine = Field(exclude=True)
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int | None = None
    stop: list[str] | None = None
    tools: list[dict[str, Any]] | None = None
    adapter: str | None = None
    parse_tool_calls: bool = True
    """Map ``<tool_call>{...}</tool_call>`` blocks in the reply to ``AIMessage.tool_calls`` when tools are bound."""

    @classmethod
    def from_pretrained(cls, path: str | Path, *, adapter: str | Path | None = None, device: str | None = None,
                        dtype: Any = None, max_batch: int = 16, batch_window_s: float = 0.01,
                        **decoding: Any) -> "LocalChatModel":
        """Load a checkpoint directory (+ optional adapter) into a new engine."""
        engine = LocalEngine.from_pretrained(path, adapter=adapter, device=device, dtype=dtype,
                                             max_batch=max_batch, batch_window_s=batch_window_s)
        return cls(engine=engine, **decoding)

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, *, adapter: str | Path | None = None, max_batch: int = 16,
                   batch_window_s: float = 0.01, name: str = "local", threads: int | None = None,
                   **decoding: Any) -> "LocalChatModel":
        """Wrap an already-loaded model and tokenizer (e.g. the PEFT model under training); ``threads``: the
        engine's decoding worker's torch threads (``LocalEngine``)."""
        engine = LocalEngine(model, tokenizer, adapter=adapter, max_batch=max_batch,
                             batch_window_s=batch_window_s, name=name, threads=threads)
        return cls(engine=engine, **decoding)

    @property
    def _llm_type(self) -> str:
        return "coevo-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.engine.name, "adapter": self.adapter_path,
                "temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}

    @property
    def adapter_path(self) -> str | None:
        """Directory of the adapter this model's requests run on (``None``: base weights)."""
        return self.engine.adapters.get(self.adapter) if self.adapter else self.engine.adapter_path

    def load_adapter(self, path: str | Path) -> None:
        """Switch the engine's active LoRA adapter (see ``LocalEngine.load_adapter``); affects every
        chat model sharing this engine that names no adapter of its own."""
        self.engine.load_adapter(path)

    def with_adapter(self, path: str | Path) -> "LocalChatModel":
        """A copy on the same engine whose requests run on the adapter at ``path`` (loaded once,
        sharing the base weights); requests of both batch together."""
        return self.model_copy(update={"adapter": self.engine.add_adapter(path)})

    def client(self) -> ContextManager[None]:
        """Run a block as one of the engine's clients (``LocalEngine.client``): the engine holds a
        batch until every client in flight has a request queued, so concurrent callers that each
        make model calls in turns (a GRPO step's rollouts) share ``generate`` calls."""
        return self.engine.client()

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """A copy (same engine) that renders ``tools`` into the chat template via ``tools=``.

        ``tool_choice`` is accepted and ignored (a local model cannot be forced); other keyword
        arguments (e.g. LangChain's ``ls_structured_output_format``) are bound to every call. Whether the
        template uses the schemas is ``engine.supports_tool_template``; the harness also renders
        tools into the prompt text.
        """
        copy = self.model_copy(update={"tools": [tool_schema(t) for t in tools]})
        return copy.bind(**kwargs) if kwargs else copy

    @property
    def context_tokens(self) -> int | None:
        """The model's context window in tokens (``max_position_embeddings``; None when unknown): a prompt
        of that many tokens or more is refused at the call (the harness's context budget is the smaller
        of this less one and its own ``max_context_tokens``: ``coevo.harnesses.fit.TokenMeter``)."""
        return self.engine.context_length

    def count_tokens(self, messages: Sequence[BaseMessage]) -> int:
        """The prompt length in tokens of ``messages`` as a call would send them: the chat template with
        the generation prompt and the bound tool schemas, through the model's own tokenizer. Raises
        ``ValueError`` when the tokenizer has no chat template."""
        return len(self.engine.render(list(messages), self.tools))

    def _request(self, messages: list[BaseMessage], stop: list[str] | None,
                 kwargs: dict[str, Any]) -> GenerationRequest:
        unknown = set(kwargs) - {"temperature", "top_p", "seed", "max_tokens", "stop", "tools", "tool_choice",
                                 "response_format"}
        if unknown:
            raise TypeError(f"LocalChatModel got unsupported call arguments {sorted(unknown)}")
        tools = kwargs.get("tools")
        tools = [tool_schema(t) for t in tools] if tools else self.tools
        temperature = kwargs.get("temperature")
        top_p = kwargs.get("top_p")
        max_tokens = kwargs.get("max_tokens")
        if self.adapter is not None and self.adapter not in self.engine.adapters:
            raise KeyError(f"adapter {self.adapter!r} is not loaded in engine {self.engine.name!r}: "
                           "use engine.add_adapter(path) or with_adapter(path)")
        schema = schema_of(kwargs.get("response_format"))
        if schema is not None:
            self.engine.constraints.grammar(schema)  # a schema it cannot decode under fails here, not in a batch
        prompt_ids = self.engine.render(messages, tools)
        limit = self.engine.context_length
        if limit is not None and len(prompt_ids) >= limit:
            raise ValueError(f"prompt of {len(prompt_ids)} tokens does not fit the context of {self.engine.name!r} "
                             f"({limit} tokens): shorten the history or lower the harness's context budget")
        return GenerationRequest(
            prompt_ids=prompt_ids,
            max_tokens=int(max_tokens if max_tokens is not None else self.max_tokens),
            temperature=float(temperature if temperature is not None else self.temperature),
            top_p=float(top_p if top_p is not None else self.top_p),
            seed=kwargs.get("seed", self.seed),
            stop=list(stop or kwargs.get("stop") or self.stop or []),
            adapter=self.adapter, json_schema=schema)

    def _result(self, result: GenerationResult, tools_bound: bool) -> ChatResult:
        tool_calls = parse_tool_calls(result.text) if tools_bound and self.parse_tool_calls else []
        message = AIMessage(
            content=result.text,
            tool_calls=tool_calls,
            response_metadata={
                TOKENS_KEY: {"prompt_token_ids": result.prompt_token_ids,
                             "completion_token_ids": result.completion_token_ids,
                             "logprobs": result.logprobs},
                "finish_reason": result.finish_reason,
                "model_name": self.engine.name,
                "adapter": self.adapter_path,
            },
            usage_metadata={"input_tokens": len(result.prompt_token_ids),
                            "output_tokens": len(result.completion_token_ids),
                            "total_tokens": len(result.prompt_token_ids) + len(result.completion_token_ids)},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        request = self._request(messages, stop, kwargs)
        result = self.engine.submit(request).result()
        return self._result(result, bool(kwargs.get("tools") or self.tools))

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        request = self._request(messages, stop, kwargs)
        result = await asyncio.wrap_future(self.engine.submit(request))
        return self._result(result, bool(kwargs.get("tools") or self.tools))
