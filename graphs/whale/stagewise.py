"""Stagewise optimisation (WHALE §6, the papers' SIA-style baseline): the whole weight budget, then
the whole harness-search budget once — one WHALE cycle whose phases hold the cumulative fixed
budgets of ``rounds`` WHALE cycles (``rounds x whale.weight_epochs`` epochs, then
``rounds x whale.search_iterations`` iterations)."""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.whale.nodes import stagewise_plan
from coevo.graphs.whale.whale import alternating


def build() -> StateGraph:
    """Stagewise wiring (uncompiled): WHALE's, with one long phase each."""
    return alternating(stagewise_plan)


graph = build().compile(name="stagewise")
