"""WHALE ("A Simple Recipe for Joint Harness-Weight Optimization", arXiv:2609.00196, §3-4, Algorithm 1)
as a LangGraph graph::

    plan                                        # plan: the phase plan (fixed lengths or adaptive)
    for c in cycles:
        W[c+1] = RSFT(W[c], H[c], sampler)      # train: a weight phase (epochs, or adaptive patience)
        H[c+1] = MH(W[c+1], H[c])                # search_start -> (propose -> search_evaluate -> accept)*

The weight phase continues the run's persistent shuffled sampler; the harness phase is a
Meta-Harness search whose accepted harness is the best of its archive on the train tasks. The
schedule (``whale.schedule``: fixed lengths or the adaptive patience rule) reads training
signals only: no node of this graph evaluates val. ``alternating(plan)`` is shared with FST and
stagewise, which differ only in their plan.
"""

from __future__ import annotations

from typing import Callable

from langgraph.graph import StateGraph

from coevo.graphs.whale.nodes import WhaleState, accept, weight_phase, whale_plan
from coevo.nodes.loop import add_rounds, meta_graph
from coevo.nodes.search import more_search, propose, search_evaluate, search_start


def add_search(builder: StateGraph, after: str, done: str) -> None:
    """A Meta-Harness phase after node ``after`` (WHALE §3.2, ``coevo.nodes.search``):
    ``search_start`` (archive = {H}) -> ``propose`` -> ``search_evaluate`` -> ``accept`` (best of the
    archive), back to ``propose`` until the phase ends, then to ``done``."""
    builder.add_node("search_start", search_start)
    builder.add_node("propose", propose)
    builder.add_node("search_evaluate", search_evaluate)
    builder.add_node("accept", accept)
    # A_0 = {H}
    builder.add_edge(after, "search_start")
    builder.add_edge("search_start", "propose")
    # C_i = proposer(A_{i-1}, M); A_i = A_{i-1} + eval(C_i, D_search)
    builder.add_edge("propose", "search_evaluate")
    # H = argmax_{A_i} score; the phase ends by its length or the patience rule
    builder.add_edge("search_evaluate", "accept")
    builder.add_conditional_edges("accept", more_search, {"continue": "propose", "done": done})


def alternating(plan: Callable, weights: bool = True, search: bool = True) -> StateGraph:
    """Cycles of a weight phase then a harness-search phase under ``plan`` (a plan node of
    ``coevo.graphs.whale.nodes``); ``weights=False`` or ``search=False`` drops that phase (WHALE §5's
    single-component baselines)."""
    builder = meta_graph(state=WhaleState)
    builder.add_node("plan", plan)
    builder.add_edge("setup", "plan")
    first = "train" if weights else "search_start"
    if weights:
        builder.add_node("train", weight_phase)
        # W[c+1] = RSFT(W[c], H[c])
        builder.add_edge("plan", "train")
    if search:
        # H[c+1] = MH(W[c+1], H[c])
        add_search(builder, after="train" if weights else "plan", done="next_round")
    # for c in cycles
    add_rounds(builder, first=first, last=None if search else "train")
    return builder


def build() -> StateGraph:
    """WHALE's wiring (uncompiled)."""
    return alternating(whale_plan)


graph = build().compile(name="whale")
