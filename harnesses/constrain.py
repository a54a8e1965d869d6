"""Constrained actions (``Decoding.constrain``): the JSON schema of the actions a harness allows at the
moment of a model call, sent as the call's ``response_format`` (the local engine decodes under it:
``coevo.models.constrained``)."""

from __future__ import annotations

from typing import Any

from coevo.envs.base import Tool
from coevo.harnesses.spec import HarnessSpec
from coevo.models.structured import RESPONSE_FORMAT_KEY


def constrained_format(spec: HarnessSpec, tools: dict[str, Tool], answer: bool = False,
                       drop: Any = ()) -> dict[str, Any]:
    """``{"response_format": action_format(...)}`` under ``spec.decoding.constrain``, ``{}`` when it is
    ``"none"``; ``tools`` are the model-visible tools by shown name, less those named in ``drop``; ``answer``
    allows the answer whatever the mode (the env-action budget is spent: answering is what is left)."""
    if spec.decoding.constrain == "none":
        return {}
    tools = {name: tool for name, tool in tools.items() if name not in set(drop)}
    return {RESPONSE_FORMAT_KEY: action_format(tools, answer or spec.decoding.constrain == "actions_or_answer")}


def action_format(tools: dict[str, Tool], answer: bool) -> dict[str, Any]:
    """OpenAI's ``response_format`` whose JSON schema is one ``json``-mode action (``coevo.harnesses.parse``):
    ``{"tool": NAME, "arguments": ARGS}`` for each tool of ``tools`` (shown name -> tool), ``ARGS`` as the
    tool accepts them now (``Tool.accepted``), and with ``answer`` also ``{"final_answer": TEXT}``
    (``Decoding.constrain``). The keys are listed in the order they are written."""
    options: list[dict[str, Any]] = [
        {"type": "object", "properties": {"tool": {"const": name}, "arguments": tool.accepted()},
         "required": ["tool", "arguments"], "additionalProperties": False}
        for name, tool in tools.items()]
    if answer or not options:
        options.append({"type": "object", "properties": {"final_answer": {"type": "string"}},
                        "required": ["final_answer"], "additionalProperties": False})
    schema = options[0] if len(options) == 1 else {"anyOf": options}
    return {"type": "json_schema", "json_schema": {"name": "action", "schema": schema}}
