"""Structured replies from any coevo chat model: JSON matching a pydantic model, with one repair.

The one path by which meta roles (curator, editor, proposer, inheritor, profiler, voters) call a
model: the same ``BaseChatModel`` layer as the policy (``coevo.models.refs.load_model``), so
retries and timeouts (``LiteLLMChatModel``, ``RouterChatModel``), cost (``response_metadata
["cost_usd"]``), token counts (``usage_metadata``) and LangSmith tracing (every call goes through
``invoke`` with a run name and tags) live in the chat-model layer, once.

``ask_structured`` sends the reply model's JSON schema as OpenAI's ``response_format``
(``{"type": "json_schema", ...}``) with every call. LiteLLM translates it per provider (and drops it
where a provider has no such option); the local engine decodes under it (JSON-schema-constrained
decoding, ``coevo.models.constrained``, so a local model's reply parses); a scripted fake ignores it.
Whatever the backend did, the reply is then parsed and validated here (a JSON object, optionally in
a Markdown fence, read by LangChain's ``parse_json_markdown``; then ``schema.model_validate`` and
the caller's semantic ``check``), and a reply that fails gets one repair turn quoting the error (Harness-S Table 8: one
revision). A reply that still fails, or a model call that fails for good, comes back as
``value=None`` with the reason: never an exception.

Why not LangChain's ``with_structured_output``: its default binds the schema as a forced tool call,
which a local model cannot be made to honour and which has no repair turn; ``response_format`` is
the form both LiteLLM and the local engine read.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.utils.json import parse_json_markdown
from pydantic import BaseModel

from coevo.models.base import record_call
from coevo.models.messages import text_of
from coevo.models.trajectory import ModelCall

M = TypeVar("M", bound=BaseModel)

RESPONSE_FORMAT_KEY = "response_format"
"""The call keyword that carries the JSON schema to a chat model (OpenAI's name, as LiteLLM takes it)."""


@dataclass
class StructuredReply(Generic[M]):
    """What ``ask_structured`` returns: the validated reply (``None`` when it never validated),
    why it did not (``reason``, empty on success), and every model call made (the first try and
    the repair; ``ModelCall`` with tokens, cost in USD and latency in seconds)."""

    value: M | None
    reason: str = ""
    calls: list[ModelCall] = field(default_factory=list)


def response_format(schema: type[BaseModel], json_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """OpenAI's ``response_format`` for ``schema``: ``{"type": "json_schema", "json_schema":
    {"name", "schema"}}`` with ``json_schema`` (default: the pydantic model's own,
    ``model_json_schema()``)."""
    body = json_schema if json_schema is not None else schema.model_json_schema()
    return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": body}}


def schema_of(fmt: Any) -> dict[str, Any] | None:
    """The JSON schema inside a ``response_format`` value (``response_format(...)``'s shape; for
    ``{"type": "json_object"}`` any object, ``{"type": "object"}``), or ``None`` for no format or
    ``{"type": "text"}``. Raises ``ValueError`` for a value of another shape."""
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("json_schema", "json_object", "text"):
        raise ValueError(f"response_format {fmt!r} is not OpenAI's shape: pass {{'type': 'json_schema', "
                         "'json_schema': {'name': ..., 'schema': {...}}}} (coevo.models.structured.response_format)")
    if fmt["type"] != "json_schema":
        return {"type": "object"} if fmt["type"] == "json_object" else None
    inner = fmt.get("json_schema") or {}
    return inner.get("schema") if isinstance(inner, dict) else None


def parse_reply(text: str, schema: type[M]) -> M:
    """``text`` (a JSON object, bare or in a Markdown code fence) validated as ``schema``. Raises
    ``OutputParserException`` when it is not JSON, ``ValidationError`` when it does not match."""
    try:
        data = parse_json_markdown(text, parser=json.loads)
    except json.JSONDecodeError as err:
        raise OutputParserException(f"the reply is not JSON ({err}); it began {text[:120]!r}") from None
    return schema.model_validate(data)


def ask_structured(model: Runnable, system: str, user: str, schema: type[M],
                   check: Callable[[M], Any] | None = None, *, json_schema: dict[str, Any] | None = None,
                   repairs: int = 1, role: str = "meta", **call_kwargs: Any) -> StructuredReply[M]:
    """Ask ``model`` for JSON matching ``schema`` (see the module docstring).

    Args: ``model`` any chat model (or a binding of one); ``system``/``user`` the two prompt
    messages; ``check(reply)`` a semantic test that raises ``ValueError`` (e.g. ``HarnessError``)
    for a reply that parses but cannot be used; ``json_schema`` the schema sent instead of
    ``schema``'s own: a narrower one (e.g. the task ids that exist as an enum) that guides the model
    and a local model's constrained decoding, while ``schema`` and ``check`` still validate;
    ``repairs`` further turns after a failed reply, each quoting the error (default 1); ``role``
    names the calls in traces (run name ``coevo.meta.<role>``, tags ``coevo-meta`` and the role);
    ``call_kwargs`` go to every call (e.g. ``temperature``).

    Returns a ``StructuredReply``: never raises for a malformed reply or a failed call (a
    ``LiteLLMCallError`` after its retries, a prompt longer than a local model's context): the
    reason says which.
    """
    messages: list[BaseMessage] = [SystemMessage(system), HumanMessage(user)]
    config = {"run_name": f"coevo.meta.{role}", "tags": ["coevo-meta", role], "metadata": {"schema": schema.__name__}}
    kwargs = {RESPONSE_FORMAT_KEY: response_format(schema, json_schema), **call_kwargs}
    calls: list[ModelCall] = []
    reason = ""
    for attempt in range(repairs + 1):
        started = time.perf_counter()
        try:
            reply = model.invoke(messages, config=config, **kwargs)
        except Exception as err:  # a call that failed for good: a rejected proposal, not a crash
            return StructuredReply(None, f"{type(err).__name__}: {str(err)[:800]}", calls)
        if not isinstance(reply, AIMessage):
            raise TypeError(f"ask_structured needs a chat model: {type(model).__name__} returned "
                            f"{type(reply).__name__}, not an AIMessage")
        calls.append(record_call(messages, reply, time.perf_counter() - started))
        text = text_of(reply.content)
        try:
            value = parse_reply(text, schema)
            if check is not None:
                check(value)
            return StructuredReply(value, "", calls)
        except ValueError as err:  # OutputParserException, ValidationError, the check's HarnessError
            reason = f"attempt {attempt + 1}: {str(err)[:800]}"
            repair = f"Your reply was invalid: {err}\nReply again with JSON only, fixing this."
            messages = [*messages, AIMessage(text), HumanMessage(repair)]
    return StructuredReply(None, f"invalid reply after {_repairs(repairs)}: {reason}", calls)


def _repairs(n: int) -> str:
    return "one repair" if n == 1 else f"{n} repairs"

