"""WHALE's harness-only baseline (WHALE §5, "harness-only holds W0 and runs 40, 60, and 40
harness-search iterations"): Meta-Harness search (§3.2) under the frozen W0 for the cumulative
search budget of the WHALE run it is matched to — one search phase of
``rounds x whale.search_iterations`` iterations, no weight phase::

    plan                                        # one phase: rounds x whale.search_iterations iterations
    H[1] = MH(W0, H0)                           # search_start -> (propose -> search_evaluate -> accept)*

Fixed lengths whatever ``whale.schedule`` says: the adaptive rule has no cumulative budget to match.
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.whale.nodes import harness_only_plan
from coevo.graphs.whale.whale import alternating


def build() -> StateGraph:
    """Harness-only wiring (uncompiled): WHALE's search phase alone, under W0."""
    return alternating(harness_only_plan, weights=False)


graph = build().compile(name="whale_harness_only")
