"""LangChain messages and tools as chat dicts, shared by every chat-model backend (docs/design.md, Models).

One conversion serves both backends: ``messages_to_chat`` feeds a tokenizer's chat template (the
local transformers backend: text content, tool-call arguments as dicts, which HF templates
expect) and ``messages_to_openai`` feeds an OpenAI-compatible API (LiteLLM: content as given,
arguments as JSON strings). ``tool_schema`` turns any tool into an OpenAI function schema;
``decode_arguments`` reads a tool call's arguments for both the API path and the Hermes/Qwen
``<tool_call>`` blocks a local model writes (``parse_tool_calls``).

Torch-free on purpose: the API path imports this module, never the local backend.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.tool import ToolCall, tool_call
from langchain_core.utils.function_calling import convert_to_openai_tool

ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "chat": "user"}
"""LangChain message type -> chat role."""

_TOOL_CALL_RE = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def text_of(content: Any) -> str:
    """The text of a message's content: a string as is; of a list of blocks, the strings and
    ``{"type": "text"}`` blocks joined (other blocks, e.g. images, dropped)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _to_dicts(messages: Sequence[BaseMessage], *, template: bool) -> list[dict[str, Any]]:
    """The one conversion behind ``messages_to_chat`` (``template=True``) and ``messages_to_openai``."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = ROLES.get(m.type)
        if role is None:
            raise ValueError(f"cannot convert a message of type {m.type!r} to a chat message: "
                             f"use one of {sorted(ROLES)} (LangChain message types)")
        entry: dict[str, Any] = {"role": role, "content": text_of(m.content) if template else m.content}
        if isinstance(m, AIMessage) and m.tool_calls:
            entry["tool_calls"] = [
                {"id": c.get("id") or f"call_{i}", "type": "function",
                 "function": {"name": c["name"],
                              "arguments": c.get("args", {}) if template else json.dumps(c.get("args", {}))}}
                for i, c in enumerate(m.tool_calls)]
        if isinstance(m, ToolMessage):
            entry["tool_call_id"] = m.tool_call_id
            if template and m.name:
                entry["name"] = m.name
        out.append(entry)
    return out


def messages_to_chat(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages -> chat-template dicts ``{"role", "content"[, "tool_calls", ...]}``.

    Content is flattened to text (``text_of``); AI tool calls become OpenAI-style ``tool_calls``
    with arguments as a dict (what HF templates expect) and ids ``call_<i>`` where a call has
    none; tool results get role ``tool`` with ``tool_call_id`` and ``name``. Raises
    ``ValueError`` for a message type with no chat role.
    """
    return _to_dicts(messages, template=True)


def messages_to_openai(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages -> OpenAI chat messages: content as given (text or content blocks),
    tool-call arguments as JSON strings, tool results with ``tool_call_id``. Raises
    ``ValueError`` for a message type with no chat role."""
    return _to_dicts(messages, template=False)


def tool_schema(tool: Any) -> dict[str, Any]:
    """OpenAI function schema ``{"type": "function", "function": {...}}`` of a coevo ``Tool``,
    a schema dict, a LangChain tool, a pydantic model or a function."""
    if isinstance(tool, dict) and tool.get("type") == "function":
        return tool
    from coevo.envs.base import Tool

    if isinstance(tool, Tool):
        return tool.schema()
    return convert_to_openai_tool(tool)


def decode_arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments as a dict: a JSON object string is parsed, a mapping copied,
    ``None``/``""`` read as no arguments. Raises ``ValueError`` when they are not a JSON object."""
    if raw is None or raw == "":
        return {}
    args = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(args, Mapping):
        raise ValueError(f"tool-call arguments are not an object: {raw!r}")
    return dict(args)


def parse_tool_calls(text: str) -> list[ToolCall]:
    """LangChain tool calls from Hermes/Qwen-style ``<tool_call>{"name", "arguments"}</tool_call>``
    blocks in ``text`` (``parameters`` is read when ``arguments`` is absent); blocks that are not
    valid JSON with a string ``name`` and object arguments are skipped. Ids are fresh
    ``call_<12 hex>``."""
    calls = []
    for match in _TOOL_CALL_RE.finditer(text):
        try:
            body = json.loads(match.group(1))
            if not isinstance(body, dict) or not isinstance(body.get("name"), str):
                continue
            args = decode_arguments(body.get("arguments", body.get("parameters")))
        except ValueError:
            continue
        calls.append(tool_call(name=body["name"], args=args, id=f"call_{uuid.uuid4().hex[:12]}"))
    return calls
