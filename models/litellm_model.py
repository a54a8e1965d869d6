"""API models and OpenAI-compatible servers through LiteLLM (docs/design.md, Models).

``LiteLLMChatModel`` is a thin LangChain ``BaseChatModel`` over ``litellm.completion`` /
``litellm.acompletion``. One model string reaches any provider LiteLLM knows
(``openai/gpt-4o-mini``, ``anthropic/...``) or a vLLM server (``hosted_vllm/<name>`` with
``api_base``; a LoRA adapter loaded on the server is addressed by its name).

What it adds over a bare call:
- retries with exponential backoff (full jitter) on transient failures only (429 rate limits, 408/5xx,
  timeouts, connection errors); a 4xx such as a bad request fails at once;
- a per-attempt timeout (LiteLLM's ``timeout``, and an ``asyncio`` guard on the async path);
- token usage in ``usage_metadata`` and the LiteLLM cost in ``response_metadata["cost_usd"]``;
- tool calls mapped to ``AIMessage.tool_calls``;
- best-effort token ids and logprobs in ``response_metadata[TOKENS_KEY]`` when the server returns
  them (vLLM with ``logprobs`` + ``return_tokens_as_token_ids``); when it does not (an API model,
  ``transformers serve``), ``response_metadata[MISSING_TOKENS_KEY]`` says so, the trajectory carries
  that reason (``ModelCall.missing_tokens``) and the training paths refuse it;
- a placeholder API key for a self-hosted ``openai/`` server (``api_base`` set, no key anywhere):
  such servers take any key, while the OpenAI client refuses to send none.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from typing import Any, Iterator, Sequence

import litellm
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.tool import invalid_tool_call, tool_call
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field
from tenacity import (
    AsyncRetrying,
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from coevo.models.base import MISSING_TOKENS_KEY, TOKENS_KEY
from coevo.models.messages import decode_arguments, messages_to_openai, tool_schema

_TOKEN_ID = re.compile(r"^token_id:(\d+)$")
SERVER_KEY = "EMPTY"
"""The API key sent to a self-hosted OpenAI-compatible server when none is configured."""


def server_api_key(model: str, api_base: str | None, api_key: str | None) -> str | None:
    """The key to send: ``api_key`` when given; ``SERVER_KEY`` for an ``openai/`` model on a
    self-hosted ``api_base`` when ``$OPENAI_API_KEY`` is unset too; else None (LiteLLM reads the
    provider's usual environment variable)."""
    if api_key is not None or not api_base or not model.startswith("openai/") or os.environ.get("OPENAI_API_KEY"):
        return api_key
    return SERVER_KEY


class LiteLLMCallError(RuntimeError):
    """A LiteLLM call failed for good: a permanent error, or transient ones past the retry limit.

    ``attempts`` is the number of calls made; the last LiteLLM exception is ``__cause__``.
    """

    def __init__(self, message: str, attempts: int):
        super().__init__(message)
        self.attempts = attempts


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying: timeouts, connection errors, HTTP 408/409/429 and 5xx."""
    if isinstance(exc, (litellm.Timeout, litellm.APIConnectionError, asyncio.TimeoutError, TimeoutError)):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def response_cost(response: Any) -> float:
    """US dollars LiteLLM priced ``response`` at; 0.0 for unpriced models (e.g. a vLLM server, whose
    replies name the served model without a provider: LiteLLM would print its provider list to
    stdout on every call, so its debug output is off while it prices)."""
    cost = _get(_get(response, "_hidden_params"), "response_cost")
    if cost is None:
        quiet, litellm.suppress_debug_info = litellm.suppress_debug_info, True
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:  # unpriced model: LiteLLM raises instead of returning 0
            cost = 0.0
        finally:
            litellm.suppress_debug_info = quiet
    return float(cost or 0.0)


def _tokens(response: Any, choice: Any) -> dict[str, Any] | None:
    """Token ids and logprobs when the server returned them (vLLM), else ``None``."""
    content = _get(_get(choice, "logprobs"), "content") or []
    logprobs = [float(_get(item, "logprob")) for item in content]
    ids = []
    for item in content:
        match = _TOKEN_ID.match(str(_get(item, "token", "")))
        if not match:
            ids = []
            break
        ids.append(int(match.group(1)))
    completion_ids = _get(choice, "token_ids") or ids or None
    prompt_ids = _get(response, "prompt_token_ids")
    if not logprobs and completion_ids is None:
        return None
    return {"prompt_token_ids": list(prompt_ids) if prompt_ids else None,
            "completion_token_ids": list(completion_ids) if completion_ids else None,
            "logprobs": logprobs or None}


def _tool_calls(message: Any) -> tuple[list[dict], list[dict]]:
    calls, invalid = [], []
    for call in _get(message, "tool_calls") or []:
        fn = _get(call, "function")
        name, raw = _get(fn, "name"), _get(fn, "arguments")
        try:
            calls.append(tool_call(name=name, args=decode_arguments(raw), id=_get(call, "id")))
        except ValueError as exc:
            invalid.append(invalid_tool_call(name=name, args=raw if isinstance(raw, str) else str(raw),
                                             id=_get(call, "id"), error=str(exc)))
    return calls, invalid


class LiteLLMChatModel(BaseChatModel):
    """A chat model served through LiteLLM, with retries, timeouts and cost accounting.

    Fields: ``model`` a LiteLLM model string (``openai/gpt-4o-mini``, ``hosted_vllm/<name>``);
    ``api_base``/``api_key`` for servers; decoding defaults ``temperature``, ``top_p``, ``seed``,
    ``max_tokens``, ``stop`` (call-time keyword arguments override them and any other keyword is
    passed to LiteLLM as is, e.g. ``mock_response`` in tests); ``timeout_s`` seconds per attempt;
    ``max_retries`` extra attempts after the first on transient errors, waiting a random time up to
    ``backoff_s * 2**k`` seconds before retry ``k`` (capped at ``backoff_max_s``; full jitter, so
    many concurrent rollouts hit by one rate limit do not retry in lockstep); ``request_tokens`` asks the server
    for logprobs and token ids (default on for ``hosted_vllm/``); ``drop_params`` lets LiteLLM drop
    settings a provider does not take (e.g. ``seed`` for Anthropic) instead of failing the call.

    Raises ``LiteLLMCallError`` (cause: the last LiteLLM exception) when a call fails for good.
    """

    model: str
    api_base: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0
    request_tokens: bool | None = None
    drop_params: bool = True
    tools: list[dict[str, Any]] | None = None
    model_kwargs: dict[str, Any] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "coevo-litellm"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model, "api_base": self.api_base, "temperature": self.temperature}

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """A copy that sends ``tools`` (OpenAI function schemas) and ``tool_choice`` with every call.

        ``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` (``"any"``/``True`` mean
        ``"required"``), a tool name, or an OpenAI tool-choice dict. Other keyword arguments
        (e.g. LangChain's ``ls_structured_output_format``) are bound to every call.
        """
        schemas = [tool_schema(t) for t in tools]
        extra = dict(self.model_kwargs)
        if tool_choice is not None and tool_choice is not False:
            if tool_choice in ("any", True):
                tool_choice = "required"
            elif isinstance(tool_choice, str) and tool_choice not in ("auto", "none", "required"):
                tool_choice = {"type": "function", "function": {"name": tool_choice}}
            extra["tool_choice"] = tool_choice
        copy = self.model_copy(update={"tools": schemas, "model_kwargs": extra})
        return copy.bind(**kwargs) if kwargs else copy

    # -- request / response --------------------------------------------------------------------

    def _params(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": messages_to_openai(messages),
                                  "timeout": self.timeout_s, "max_retries": 0, "drop_params": self.drop_params}
        for key in ("api_base", "temperature", "top_p", "seed", "max_tokens", "stop"):
            if getattr(self, key) is not None:
                params[key] = getattr(self, key)
        key = server_api_key(self.model, self.api_base, self.api_key)
        if key is not None:
            params["api_key"] = key
        if self.tools:
            params["tools"] = self.tools
        params.update(self.model_kwargs)
        if stop:
            params["stop"] = stop
        call = {k: v for k, v in kwargs.items() if v is not None}
        if "tools" in call:
            call["tools"] = [tool_schema(t) for t in call["tools"]]
        params.update(call)
        if self._wants_tokens():
            params.setdefault("logprobs", True)
            extra = dict(params.get("extra_body") or {})
            extra.setdefault("return_tokens_as_token_ids", True)
            extra.setdefault("return_token_ids", True)
            params["extra_body"] = extra
        return params

    def _wants_tokens(self) -> bool:
        return self.request_tokens if self.request_tokens is not None else self.model.startswith("hosted_vllm/")

    def _result(self, response: Any) -> ChatResult:
        choice = response.choices[0]
        message = choice.message
        calls, invalid = _tool_calls(message)
        usage = _get(response, "usage")
        prompt_tokens = int(_get(usage, "prompt_tokens") or 0)
        completion_tokens = int(_get(usage, "completion_tokens") or 0)
        metadata: dict[str, Any] = {"model_name": _get(response, "model") or self.model,
                                    "finish_reason": _get(choice, "finish_reason"),
                                    "cost_usd": response_cost(response)}
        tokens = _tokens(response, choice)
        if tokens is not None:
            metadata[TOKENS_KEY] = tokens
        else:
            where = self.api_base or "its provider"
            metadata[MISSING_TOKENS_KEY] = (f"{self.model} at {where} returned no token ids or logprobs "
                                            f"(request_tokens={bool(self._wants_tokens())})")
        reply = AIMessage(
            content=_get(message, "content") or "", tool_calls=calls, invalid_tool_calls=invalid,
            response_metadata=metadata, id=_get(response, "id"),
            usage_metadata={"input_tokens": prompt_tokens, "output_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens})
        return ChatResult(generations=[ChatGeneration(message=reply)])

    # -- retries ---------------------------------------------------------------------------------

    def _retry_args(self) -> dict[str, Any]:
        return {"stop": stop_after_attempt(self.max_retries + 1),
                "wait": wait_random_exponential(multiplier=self.backoff_s, max=self.backoff_max_s),
                "retry": retry_if_exception(is_transient), "reraise": False}

    def _failure(self, exc: BaseException, attempts: int) -> LiteLLMCallError:
        kind = "transient" if is_transient(exc) else "permanent"
        tail = f" (gave up after {attempts} attempts)" if kind == "transient" else ""
        return LiteLLMCallError(f"LiteLLM call to {self.model!r} failed with a {kind} "
                                f"{type(exc).__name__}{tail}: {exc}", attempts)

    @contextlib.contextmanager
    def _failures(self, retrying: Retrying | AsyncRetrying) -> Iterator[None]:
        """Re-raise what escapes a ``retrying`` call (sync or async) as ``LiteLLMCallError``, with
        the number of attempts made."""
        try:
            yield
        except RetryError as err:
            exc = err.last_attempt.exception()
            raise self._failure(exc, err.last_attempt.attempt_number) from exc
        except Exception as exc:
            raise self._failure(exc, retrying.statistics.get("attempt_number", 1)) from exc

    def complete(self, messages: list[BaseMessage], stop: list[str] | None = None, **kwargs: Any) -> ChatResult:
        """One call with this model's retries (what ``invoke`` runs underneath): ``messages`` in,
        a ``ChatResult`` with one generation out. Raises ``LiteLLMCallError``."""
        params = self._params(messages, stop, kwargs)
        retrying = Retrying(**self._retry_args())
        with self._failures(retrying):
            response = retrying(litellm.completion, **params)
        return self._result(response)

    async def acomplete(self, messages: list[BaseMessage], stop: list[str] | None = None, **kwargs: Any) -> ChatResult:
        """Async ``complete``: each attempt bounded by ``timeout_s``. Raises ``LiteLLMCallError``."""
        params = self._params(messages, stop, kwargs)

        async def attempt() -> Any:
            try:
                return await asyncio.wait_for(litellm.acompletion(**params), timeout=self.timeout_s)
            except asyncio.TimeoutError as exc:
                raise litellm.Timeout(f"no reply within timeout_s={self.timeout_s}", model=self.model,
                                      llm_provider=self.model.split("/")[0]) from exc

        retrying = AsyncRetrying(**self._retry_args())
        with self._failures(retrying):
            response = await retrying(attempt)
        return self._result(response)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return self.complete(messages, stop, **kwargs)

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return await self.acomplete(messages, stop, **kwargs)
