"""WHALE with the adaptive schedule (arXiv:2609.00196, §4, App. A.1) as its own strategy, so a
comparison (``coevo compare``, one config) holds both of WHALE's schedules side by side::

    plan                                        # the adaptive plan, whatever whale.schedule says
    for c in cycles:
        W[c+1] = RSFT(W[c], H[c], sampler)      # until the patience rule stops the phase (whale.min_epochs,
                                                # patience_epochs, window_epochs; at most whale.max_epochs)
        H[c+1] = MH(W[c+1], H[c])                # at least whale.min_iterations, stopping after
                                                # whale.search_patience without a new best

``whale`` follows ``whale.schedule`` (the preset's ``fixed``); this strategy is WHALE's wiring with
``adaptive_plan``.
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.whale.nodes import adaptive_plan
from coevo.graphs.whale.whale import alternating


def build() -> StateGraph:
    """WHALE's wiring with the adaptive plan (uncompiled)."""
    return alternating(adaptive_plan)


graph = build().compile(name="whale_adaptive")
