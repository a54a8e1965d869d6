"""coevo.models.messages: one message conversion for both backends, and an API path without torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from langchain_core.messages import AIMessage, FunctionMessage, HumanMessage, SystemMessage, ToolMessage

from coevo.envs.base import Tool
from coevo.models.messages import (
    decode_arguments,
    messages_to_chat,
    messages_to_openai,
    parse_tool_calls,
    text_of,
    tool_schema,
)

CONVERSATION = [
    SystemMessage("be brief"),
    HumanMessage([{"type": "text", "text": "add "}, "1 and 2", {"type": "image_url", "image_url": {"url": "x"}}]),
    AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": None}]),
    ToolMessage("3", tool_call_id="call_0", name="add"),
]


def test_one_conversion_feeds_templates_and_the_api_with_the_same_structure():
    chat, api = messages_to_chat(CONVERSATION), messages_to_openai(CONVERSATION)
    assert [m["role"] for m in chat] == [m["role"] for m in api] == ["system", "user", "assistant", "tool"]
    assert chat[1]["content"] == "add 1 and 2"  # a template gets text only
    assert api[1]["content"] == CONVERSATION[1].content  # the API gets the blocks as given
    assert chat[2]["tool_calls"][0]["id"] == api[2]["tool_calls"][0]["id"] == "call_0"
    assert chat[2]["tool_calls"][0]["function"]["arguments"] == {"a": 1, "b": 2}
    assert json.loads(api[2]["tool_calls"][0]["function"]["arguments"]) == {"a": 1, "b": 2}
    assert chat[3] == {"role": "tool", "content": "3", "tool_call_id": "call_0", "name": "add"}
    assert api[3] == {"role": "tool", "content": "3", "tool_call_id": "call_0"}


def test_a_message_type_with_no_chat_role_is_named_in_the_error():
    for convert in (messages_to_chat, messages_to_openai):
        with pytest.raises(ValueError, match="type 'function'.*'human'"):
            convert([FunctionMessage("x", name="f")])


def test_text_of_keeps_strings_and_text_blocks_only():
    assert text_of("plain") == "plain"
    assert text_of(["a", {"type": "text", "text": "b"}, {"type": "image_url", "image_url": {}}]) == "ab"
    assert text_of(None) == ""


def test_decode_arguments_reads_json_objects_and_rejects_the_rest():
    assert decode_arguments('{"x": 1}') == {"x": 1}
    assert decode_arguments({"x": 1}) == {"x": 1}
    assert decode_arguments(None) == decode_arguments("") == {}
    for bad in ("[1, 2]", "{nope", 3):
        with pytest.raises(ValueError):
            decode_arguments(bad)


def test_hermes_blocks_read_parameters_and_skip_non_object_arguments():
    text = ('<tool_call>{"name": "f", "parameters": {"x": 1}}</tool_call>'
            '<tool_call>{"name": "g", "arguments": "[1]"}</tool_call>'
            '<tool_call>{"name": "h", "arguments": "{\\"y\\": 2}"}</tool_call>')
    calls = parse_tool_calls(text)
    assert [(c["name"], c["args"]) for c in calls] == [("f", {"x": 1}), ("h", {"y": 2})]
    assert all(c["id"].startswith("call_") and c["type"] == "tool_call" for c in calls)


def test_tool_schema_of_a_coevo_tool_and_of_a_schema_dict():
    tool = Tool("add", "Add.", {"type": "object", "properties": {"a": {"type": "integer"}}}, lambda a: a)
    schema = tool_schema(tool)
    assert schema["type"] == "function" and schema["function"]["name"] == "add"
    assert tool_schema(schema) is schema


HEAVY = ("torch", "matplotlib", "scipy.stats")
"""Modules the API path and the CLI's start must not import: torch (the local backend's), and matplotlib and
scipy.stats (imported where a plot or a Wilson interval is made; together about 2.5 s of every `coevo` start)."""


def _heavy_imported_after(*codes: str) -> list[set[str]]:
    """Run each of ``codes`` in turn in one fresh interpreter (so this session's imports cannot mask them); the
    ``HEAVY`` modules in ``sys.modules`` after each (one interpreter for all: its start and coevo's own imports cost
    several seconds each)."""
    probe = "import sys\n" + "".join(f"{code}\nprint('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
                                      for code in codes)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    found = [line.removeprefix("HEAVY:") for line in done.stdout.splitlines() if line.startswith("HEAVY:")]
    assert len(found) == len(codes), done.stdout[-3000:]
    return [set(filter(None, line.split(","))) for line in found]


def test_the_api_path_and_the_cli_import_no_torch_matplotlib_or_scipy_stats_and_the_local_backend_and_a_plot_do():
    """The second step is the control for the first: the probe sees each module once it is imported."""
    api, local = _heavy_imported_after(
        "import coevo.models.litellm_model\n"
        "from coevo.models.refs import load_model\n"
        "assert type(load_model('litellm:openai/gpt-4o-mini')).__name__ == 'LiteLLMChatModel'\n"
        "import coevo.cli.app",
        "import coevo.models.local\nfrom coevo.report.plots import pyplot\npyplot()\n"
        "from coevo.evaluation.stats import score_estimate\nscore_estimate([1.0, 0.0])")
    assert api == set()
    assert local == set(HEAVY)
