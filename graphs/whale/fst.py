"""FST as WHALE's prompt-restricted control (WHALE §5; Tiwari et al., 2026): WHALE's schedule and
update methods, with every harness edit confined to the system and user prompts
(``PROMPT_FIELDS``), enforced by the patch checker (``coevo.harnesses.patch.check_fields``)."""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.whale.nodes import fst_plan
from coevo.graphs.whale.whale import alternating


def build() -> StateGraph:
    """FST's wiring (uncompiled): WHALE's, with the FST plan."""
    return alternating(fst_plan)


graph = build().compile(name="fst")
