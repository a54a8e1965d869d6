"""WHALE (``shared/papers/whale.txt`` §3-4, Algorithm 1) as a LangGraph graph::

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

from coevo.graphs.wiring import add_rounds, add_search, meta_graph
from coevo.nodes.phases import whale_plan
from coevo.nodes.train import train


def alternating(plan: Callable) -> StateGraph:
    """Cycles of a weight phase then a harness-search phase under ``plan`` (a ``coevo.nodes.phases`` plan node)."""
    builder = meta_graph()
    builder.add_node("plan", plan)
    builder.add_node("train", train)
    builder.add_edge("setup", "plan")
    # W[c+1] = RSFT(W[c], H[c])
    builder.add_edge("plan", "train")
    # H[c+1] = MH(W[c+1], H[c])
    add_search(builder, after="train", done="next_round")
    # for c in cycles
    add_rounds(builder, first="train", last=None)
    return builder


def build() -> StateGraph:
    """WHALE's wiring (uncompiled)."""
    return alternating(whale_plan)


graph = build().compile(name="whale")
