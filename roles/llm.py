"""What every LLM meta role shares: a chat model from the policy's layer, asked for structured JSON.

A role's model is a model reference (``local:smollm2-135m``, ``litellm:openai/gpt-4o-mini``,
``router:FILE``, or a bare LiteLLM string such as ``openai/NAME?api_base=URL``, read as
``litellm:...``; ``coevo.models.refs``) or a chat model already built. Each call asks for JSON
matching the role's pydantic reply model through ``coevo.models.structured.ask_structured`` (the
schema as ``response_format``, parse and validate, the caller's semantic ``check``, one repair
turn; retries, costs and tracing in the chat-model layer). A reply that still does not validate
comes back as ``value=None`` with the reason, never a crash. Every call made is returned as an
``LLMCallRecord`` (role, model, tokens, cost, latency): the node that invoked the role stores them;
roles never touch the archive.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel

from coevo.models.refs import REF_KEY, as_reference, load_model, split_settings
from coevo.models.structured import ask_structured
from coevo.models.trajectory import ModelCall
from coevo.records import LLMCallRecord

M = TypeVar("M", bound=BaseModel)

DEFAULT_SETTINGS: dict[str, Any] = {"temperature": 0.6}
"""Decoding settings a role built from a reference starts from (``meta.temperature`` overrides)."""
LOCAL_SETTINGS: dict[str, Any] = {"max_tokens": 512}
"""... and for a ``local:`` reference (whose own default of 256 tokens may cut a patch)."""


@dataclass
class JsonReply(Generic[M]):
    """What ``JsonRole.ask`` returns: the validated reply (None when it never validated), the reason
    it did not, and every LLM call made (the first try and the repair)."""

    value: M | None
    reason: str = ""
    calls: list[LLMCallRecord] = field(default_factory=list)


def call_record(call: ModelCall, role: str, model: str, schema: str) -> LLMCallRecord:
    """The archive record of one meta-role model call: ``call``'s tokens, cost (USD) and latency
    (s) under ``role`` and ``model`` (the reference without its settings), the request (schema
    name, messages as LangChain dicts) and the reply text."""
    content = (call.output.get("data") or {}).get("content", "")
    return LLMCallRecord(id=uuid.uuid4().hex, role=role, model=model, latency_s=call.latency_s, cost_usd=call.cost_usd,
                         input_tokens=call.input_tokens, output_tokens=call.output_tokens,
                         request={"schema": schema, "messages": call.input}, response={"content": content})


class JsonRole:
    """An LLM meta role (module doc). ``model``: a reference string, built with ``load_model`` and
    ``settings`` as its decoding settings (``temperature``, ``max_tokens``, a LiteLLM setting such as
    ``api_base`` or, in tests, ``mock_response``), or a chat model (then ``settings`` go to every
    call). ``self.model`` is the label stored with each call: the reference without its ``?settings``
    (which may hold keys), or a built model's reference, model name or type. Stateless: concurrent
    branches may share one role. Raises ``ModelRefError`` for a malformed reference."""

    role = "meta"

    def __init__(self, model: str | BaseChatModel, **settings: Any) -> None:
        if isinstance(model, str):
            self.model, ref = split_settings(model)[0], as_reference(model)
            defaults = {**DEFAULT_SETTINGS, **(LOCAL_SETTINGS if ref.startswith("local:") else {})}
            self.chat: BaseChatModel = load_model(ref, **{**defaults, **settings})
            self.call_kwargs: dict[str, Any] = {}
        else:
            params = model._identifying_params
            self.model = str((model.metadata or {}).get(REF_KEY) or params.get("model_name") or params.get("model")
                             or model._llm_type)
            self.chat, self.call_kwargs = model, settings

    def ask(self, system: str, user: str, schema: type[M], check: Callable[[M], Any] | None = None,
            json_schema: dict[str, Any] | None = None) -> JsonReply[M]:
        """Ask for JSON matching ``schema``; ``check(reply)`` may raise ``ValueError`` or
        ``HarnessError`` for semantic problems; ``json_schema``: a narrower schema to send
        (``narrowed``). One repair call on failure."""
        reply = ask_structured(self.chat, system, user, schema, check, json_schema=json_schema, role=self.role,
                               **self.call_kwargs)
        calls = [call_record(c, self.role, self.model, schema.__name__) for c in reply.calls]
        return JsonReply(reply.value, reply.reason, calls)


def narrowed(schema: type[BaseModel], **fields: dict[str, Any]) -> dict[str, Any]:
    """``schema``'s JSON schema with some field schemas narrowed to what this call accepts, to send
    as the reply's format (``JsonRole.ask(json_schema=...)``): ``fields`` maps a top-level field
    name, or ``Model__field`` for a field of a nested model (in ``$defs``), to the keywords to set,
    e.g. ``narrowed(CuratorReply, DirectionReply__task_ids={"items": {"enum": ids}})``. Raises
    ``KeyError`` for a field the schema does not have."""
    out = schema.model_json_schema()
    for key, keywords in fields.items():
        model, _, name = key.rpartition("__")
        props = out["$defs"][model]["properties"] if model else out["properties"]
        props[name] = {**props[name], **keywords}
    return out
