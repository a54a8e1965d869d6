"""The LiteLLM call every LLM meta role makes: JSON matching a pydantic schema, one repair retry.

Each call asks for JSON matching a pydantic model, validates the reply (and the caller's semantic
``check``), and on failure makes one repair call quoting the validation error (Harness-S Table 8:
one revision). A reply that still does not validate comes back as ``value=None`` with the reason,
never a crash. Every call made is returned as an ``LLMCallRecord`` (role, model, tokens, cost,
latency): the node that invoked the role stores them; roles never touch the archive.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from coevo.harnesses.errors import HarnessError
from coevo.records import LLMCallRecord

M = TypeVar("M", bound=BaseModel)


@dataclass
class JsonReply(Generic[M]):
    """What ``JsonRole.ask`` returns: the validated reply (None when it never validated), the reason
    it did not, and every LLM call made (the first try and the repair)."""

    value: M | None
    reason: str = ""
    calls: list[LLMCallRecord] = field(default_factory=list)


class JsonRole:
    """A LiteLLM-backed meta role. ``model`` is a LiteLLM model string, optionally with settings
    (``openai/NAME?api_base=http://host:8000/v1&max_tokens=512``: a self-hosted server, as
    ``coevo.models.refs.litellm_kwargs`` reads it); ``completion_kwargs`` go to ``litellm.completion``
    too (e.g. ``mock_response`` in tests, ``temperature``). Stateless: concurrent branches may share
    one role."""

    role = "meta"

    def __init__(self, model: str, **completion_kwargs: Any) -> None:
        from coevo.models.refs import litellm_kwargs

        self.model, settings = litellm_kwargs(model)
        self.kwargs = {"temperature": 0.6, "num_retries": 2, "timeout": 120, **settings, **completion_kwargs}

    def _complete(self, messages: list[dict[str, str]], schema: type[BaseModel]) -> tuple[str, LLMCallRecord]:
        import litellm  # imported on first use: offline runs never load it

        fmt = {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()}}
        started = time.perf_counter()
        resp = litellm.completion(model=self.model, messages=messages, response_format=fmt, **self.kwargs)
        latency = time.perf_counter() - started
        usage = getattr(resp, "usage", None)
        try:
            cost = float(litellm.completion_cost(completion_response=resp) or 0.0)
        except Exception:  # unpriced model
            cost = 0.0
        text = resp.choices[0].message.content or ""
        call = LLMCallRecord(id=uuid.uuid4().hex, role=self.role, model=self.model, latency_s=latency, cost_usd=cost,
                             input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                             output_tokens=getattr(usage, "completion_tokens", 0) or 0,
                             request={"schema": schema.__name__, "messages": messages}, response={"content": text})
        return text, call

    def ask(self, system: str, user: str, schema: type[M], check: Callable[[M], Any] | None = None) -> JsonReply[M]:
        """Ask for JSON matching ``schema``; ``check(reply)`` may raise ``ValueError`` or
        ``HarnessError`` for semantic problems. One repair call on failure."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        calls: list[LLMCallRecord] = []
        reason = ""
        for attempt in range(2):
            try:
                text, call = self._complete(messages, schema)
            except Exception as err:  # network/provider failure: a rejected proposal, not a crash
                return JsonReply(None, f"{type(err).__name__}: {err}", calls)
            calls.append(call)
            try:
                reply = schema.model_validate_json(_strip_fence(text))
                if check is not None:
                    check(reply)
                return JsonReply(reply, "", calls)
            except (ValidationError, ValueError, HarnessError) as err:
                reason = f"attempt {attempt + 1}: {str(err)[:800]}"
                repair = f"Your reply was invalid: {err}\nReply again with JSON only, fixing this."
                messages = messages + [{"role": "assistant", "content": text}, {"role": "user", "content": repair}]
        return JsonReply(None, f"invalid reply after one repair: {reason}", calls)


def _strip_fence(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text
