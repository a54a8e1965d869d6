"""PACE (Prompt And Control Logic Evolution; its abstract; docs/papers.md)
as a LangGraph graph, weights frozen::

    phase = prompt                                        # plan: edits confined to PROMPT_FIELDS
    A = {H}                                               # search_start
    loop:
        C     = propose(A)                                # propose -> search_evaluate (train evidence)
        b, c  = validate(W0, H), validate(W0, C)          # held-out val
        H     = gate(b, c)                                # accepted only through the val gate
        if no validated gain for pace.patience iterations:
            phase = control (CONTROL_FIELDS: hooks, parser, budget, tool view, context), or stop

Each phase's edits are checked to stay inside its fields by the patch checker (``realise``).
"""

from __future__ import annotations

from typing import Callable

from langgraph.graph import StateGraph

from coevo.graphs.pace.nodes import PaceState, pace_plan, pace_step
from coevo.nodes.loop import gate, meta_graph, next_round, validate
from coevo.nodes.search import more_search, propose, search_evaluate, search_start


def wire(plan: Callable[..., dict]) -> StateGraph:
    """PACE's wiring with ``plan`` (a plan node of ``coevo.graphs.pace.nodes``: which timescales run),
    uncompiled."""
    builder = meta_graph(state=PaceState)
    for name, node in (("plan", plan), ("search_start", search_start), ("propose", propose),
                       ("search_evaluate", search_evaluate), ("validate", validate), ("gate", gate),
                       ("next_round", next_round), ("pace_step", pace_step)):
        builder.add_node(name, node)
    # phase = prompt
    builder.add_edge("setup", "plan")
    # A = {H}
    builder.add_edge("plan", "search_start")
    builder.add_edge("search_start", "propose")
    # C = propose(A), with train evidence for the next proposal
    builder.add_edge("propose", "search_evaluate")
    # b, c = validate(W0, H), validate(W0, C)
    builder.add_edge("search_evaluate", "validate")
    # H = gate(b, c)
    builder.add_edge("validate", "gate")
    builder.add_edge("gate", "next_round")
    # no validated gain for pace.patience iterations: prompt -> control -> stop
    builder.add_edge("next_round", "pace_step")
    builder.add_conditional_edges("pace_step", more_search, {"continue": "propose", "done": "final_test"})
    return builder


def build() -> StateGraph:
    """PACE's wiring (uncompiled): the prompt phase, then the control-logic phase."""
    return wire(pace_plan)


graph = build().compile(name="pace")
