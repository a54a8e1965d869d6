"""The Harness-S router as a LangGraph graph (Eq. 9)::

    START -> vote x V (Send, one per voter, each with its own shuffled candidates) -> tally -> END
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from coevo.nodes.vote import RouterContext, RouterState, fan_out_votes, tally, vote


def build() -> StateGraph:
    """The router's wiring (uncompiled): voters fan out with ``Send``, ``tally`` combines their ballots."""
    builder = StateGraph(RouterState, context_schema=RouterContext)
    builder.add_node("vote", vote)
    builder.add_node("tally", tally)
    builder.add_conditional_edges(START, fan_out_votes, ["vote"])
    builder.add_edge("vote", "tally")
    builder.add_edge("tally", END)
    return builder


graph = build().compile(name="router")
