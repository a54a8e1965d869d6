"""The static baseline (docs/design.md, Strategies): the start pair (H0, W0) is tested as it is —
no weight stage, no refinement, no rounds."""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.nodes.loop import meta_graph


def build() -> StateGraph:
    """setup -> final_test (uncompiled)."""
    builder = meta_graph()
    # test (H0, W0) as they are
    builder.add_edge("setup", "final_test")
    return builder


graph = build().compile(name="static")
