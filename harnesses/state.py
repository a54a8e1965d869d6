"""``HarnessState``: the state of one harness episode, each field with its reducer.

Declared apart from the graph module (as react-agent's ``state.py``) because the engine's nodes
and routers annotate it and LangGraph resolves those annotations when the graph is built;
``coevo.harnesses.runtime`` re-exports it.
"""

from __future__ import annotations

import operator
from typing import Annotated

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict  # typing's on Python < 3.12 has no JSON schema (Studio's input form)


class HarnessState(TypedDict, total=False):
    """State of one episode.

    ``messages`` accumulates (LangGraph ``add_messages``: a ``RemoveMessage`` deletes by id);
    ``calls`` and ``hook_events`` accumulate (list concatenation); every other field is replaced
    by the node that writes it.
    """

    task: str
    """The task text (input; defaults to the episode's task prompt)."""
    messages: Annotated[list[AnyMessage], add_messages]
    """Full history: prompt, model replies, observations and harness injections."""
    calls: Annotated[list[dict], operator.add]
    """Recorded model calls (``ModelCall`` dicts), in order."""
    hook_events: Annotated[list[dict], operator.add]
    """Hooks that fired: ``{"hook", "event", "action"}``."""
    model_calls: int
    """Model calls made so far (also the index of the next call: its seed derives from it)."""
    env_actions: int
    """Env tool calls executed so far (scratchpad notes excluded)."""
    violations: int
    """Interface violations (unparseable replies, unexposed tools, missing required arguments)."""
    violated_turns: list[int]
    """The model turns (1-based call numbers) with at least one violation: TIMR's numerator."""
    scratchpad: list[str]
    """Notes the model wrote with the ``note`` tool (when ``spec.memory.scratchpad``)."""
    pending: list[dict]
    """Actions parsed from the last reply, awaiting ``run_tools``."""
    last: dict
    """Facts for hook conditions: last reply, observation, tool, error, parsed."""
    answer: str | None
    """The final answer, once given and not blocked."""
    stop_reason: str | None
    """Why the episode ended: ``final_answer``, ``no_answer``, ``budget:<name>`` or ``hook:<name>``."""
