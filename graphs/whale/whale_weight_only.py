"""WHALE's weight-only baseline (WHALE §5, "Weight-only holds H0 and trains ..."): online RSFT
(§3.1) under the frozen H0 for the cumulative weight budget of the WHALE run it is matched to —
one weight phase of ``rounds x whale.weight_epochs`` epochs from the same persistent sampler,
no harness search ("The single-component baselines receive budgets matching the cumulative
budgets of the WHALE and FST runs")::

    plan                                        # one phase: rounds x whale.weight_epochs epochs
    W[1] = RSFT(W0, H0, sampler)                # train

Fixed lengths whatever ``whale.schedule`` says: the adaptive rule has no cumulative budget to match.
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.whale.nodes import weight_only_plan
from coevo.graphs.whale.whale import alternating


def build() -> StateGraph:
    """Weight-only wiring (uncompiled): WHALE's weight phase alone."""
    return alternating(weight_only_plan, search=False)


graph = build().compile(name="whale_weight_only")
