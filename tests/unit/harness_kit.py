"""Shared fakes for the harness unit tests: a toy env with tools, and one-line graph runs.

Imported by the ``test_harness_*``, ``test_parse`` and ``test_trajectory_segments`` modules
(pytest puts this directory on ``sys.path``). Everything is offline and runs in milliseconds.
"""

from __future__ import annotations

import os

for _key, _value in {"HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_DISABLE_TELEMETRY": "1",
                     "LANGGRAPH_NO_VERSION_CHECK": "true"}.items():
    os.environ.setdefault(_key, _value)

from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

from langchain_core.messages import AIMessage, BaseMessage  # noqa: E402

from coevo.envs.base import Episode, Score, Task, Tool  # noqa: E402
from coevo.harnesses import HarnessSpec, load_harness  # noqa: E402
from coevo.harnesses.runtime import build_harness_graph  # noqa: E402
from coevo.models.fake import ScriptedChatModel  # noqa: E402

PAGE = "page 1 of 3: alpha, beta; next_page=2"

# Harness-S Table 7, verbatim (cases 1 and 3 are hooks, case 2 is a prompt rule).
PAGINATION_HOOK = {"action": "warn", "condition": "pagination_present", "event": "after_tool",
                   "message": "Pagination metadata is present. Continue only until an empty or short page or an "
                              "authoritative total; do not treat the first page as complete.", "parameters": {}}
INTERSECTION_RULE = {"slot": "action_guidance", "text": "If the request combines conditions, fetch each condition "
                     "separately and compute the intersection; do not broaden an item to its containing collection."}
LOW_BUDGET_HOOK = {"action": "warn", "condition": "remaining_steps_lte", "event": "after_tool",
                   "message": "Execution budget is low. Finish only the required verification and reserve one step "
                              "for complete_task; avoid unrelated exploration.", "parameters": {"threshold": 3}}
TABLE7 = {"hooks": {"pagination-completion-guidance": PAGINATION_HOOK, "low-budget-completion": LOW_BUDGET_HOOK},
          "prompt": {"rules": {"reconcile-before-side-effect": INTERSECTION_RULE}}}


def _obj(**props: str) -> dict[str, Any]:
    return {"type": "object", "properties": {k: {"type": t} for k, t in props.items()}, "required": list(props)}


def boom() -> str:
    """A tool that always raises."""
    raise RuntimeError("disk on fire")


def toy_tools(log: list[tuple[str, dict]] | None = None) -> list[Tool]:
    """Four env tools: ``search`` (paginated output), ``lookup`` (echoes its key), ``echo`` (returns
    its text), ``boom`` (raises). Calls are appended to ``log`` as ``(name, args)``."""
    log = log if log is not None else []

    def logged(name: str, fn: Any) -> Any:
        def run(**args: Any) -> Any:
            log.append((name, args))
            return fn(**args)
        return run

    return [
        Tool("search", "Search the records.", _obj(query="string"), logged("search", lambda query: PAGE)),
        Tool("lookup", "Look a key up.", _obj(key="string"), logged("lookup", lambda key: f"value of {key}")),
        Tool("echo", "Return the text.", _obj(text="string"), logged("echo", lambda text: text)),
        Tool("boom", "Always fails.", {"type": "object", "properties": {}}, logged("boom", boom)),
    ]


def make_task(prompt: str = "Find the magic number.") -> Task:
    """A train task of the toy env."""
    return Task(id="toy-1", env="toy", split="train", prompt=prompt)


def call(name: str, content: str = "", **args: Any) -> AIMessage:
    """A native tool-call reply asking for ``name(**args)``."""
    return AIMessage(content=content, tool_calls=[{"name": name, "args": args, "id": f"call_{name}"}])


@dataclass
class Run:
    """The outcome of one graph run: final ``state``, the ``model`` (its ``calls`` are what it saw),
    and the tool ``log``."""

    state: dict[str, Any]
    model: ScriptedChatModel
    log: list[tuple[str, dict]] = field(default_factory=list)

    def seen(self, i: int) -> list[str]:
        """The text of each message the model received at its ``i``-th call."""
        return [str(m.content) for m in self.model.calls[i]]

    def seen_text(self, i: int) -> str:
        """Everything the model received at its ``i``-th call, joined."""
        return "\n".join(self.seen(i))

    def events(self, event: str | None = None) -> list[str]:
        """Names of the hooks that fired (on ``event`` only, when given), in order."""
        return [e["hook"] for e in self.state.get("hook_events", []) if event is None or e["event"] == event]


def run(spec: dict | HarnessSpec, script: list[Any], prompt: str = "Find the magic number.",
        with_tokens: bool = False, tools: list[Tool] | None = None) -> Run:
    """Compile ``spec`` around a scripted model on the toy tools and ``invoke`` it to the end."""
    log: list[tuple[str, dict]] = []
    model = ScriptedChatModel(script=script, with_tokens=with_tokens)
    episode = Episode(task=make_task(prompt), tools=tools if tools is not None else toy_tools(log))
    state = build_harness_graph(load_harness(spec), model, episode).invoke({})
    return Run(state, model, log)


def kinds(messages: list[BaseMessage]) -> list[str]:
    """Message types in order (``system``, ``human``, ``ai``, ``tool``)."""
    return [m.type for m in messages]


class ToyEnv:
    """A one-task env: the answer is ``42``; ``closed`` counts episode closes."""

    name = "toy"

    def __init__(self) -> None:
        self.closed = 0

    def tasks(self, split: str, n: int | None = None) -> list[Task]:
        return [make_task()][:n]

    def episode(self, task: Task, seed: int = 0) -> Episode:
        def close() -> None:
            self.closed += 1
        return Episode(task=task, tools=toy_tools(), closer=close)

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        ok = (answer or "").strip() == "42"
        return Score(reward=1.0 if ok else 0.0, passed=ok, detail={"got": answer})
