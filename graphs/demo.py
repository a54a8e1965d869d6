"""A demo harness graph for ``langgraph dev`` / Studio and for embedding examples.

It runs the shipped demo spec around a tiny offline policy (a scripted model that calls the
``calculator`` tool once, then answers), so Studio can draw and run it with no key and no GPU.
Set ``COEVO_DEMO_MODEL`` to a model ref (e.g. ``local:smollm2-135m``) to drive it with a real policy.
"""

from __future__ import annotations

import os
import re

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from coevo.envs.base import Episode, Task
from coevo.envs.calculator import calculator_tool
from coevo.harnesses.runtime import build_harness_graph
from coevo.harnesses.spec import load_harness
from coevo.models.fake import ScriptedChatModel

CALCULATOR = calculator_tool()  # the guarded env calculator (coevo.envs.calculator)

DEMO_SPEC = load_harness("demo")  # harnesses/base/demo.json


def _demo_policy(messages: list[BaseMessage]) -> AIMessage:
    """Call the calculator on the task's arithmetic, then answer with its output."""
    observations = [m for m in messages if isinstance(m, ToolMessage)]
    if observations:
        return AIMessage(content=f"Final answer: {observations[-1].content}")
    task = str(messages[1].content) if len(messages) > 1 else ""
    expr = re.search(r"[\d(][\d+\-*/(). ]*", task)
    return AIMessage(content="", tool_calls=[{"name": "calculator",
                                              "args": {"expression": (expr.group(0) if expr else "0").strip()},
                                              "id": "call_demo"}])


def demo_model():
    """The demo policy: ``COEVO_DEMO_MODEL`` if set, else the scripted calculator policy."""
    ref = os.environ.get("COEVO_DEMO_MODEL")
    if ref:
        from coevo.models.refs import load_model

        return load_model(ref)
    return ScriptedChatModel(script=[_demo_policy])


DEMO_TASK = Task(id="demo", env="demo", split="train", prompt="What is (17 + 25) * 3?")
graph = build_harness_graph(DEMO_SPEC, demo_model(), Episode(task=DEMO_TASK, tools=[CALCULATOR]))
