"""Sub-wirings several families share: the meta graph's start and end, VACE's refinement chain
and the round loop. Each is a few ``add_node``/``add_edge`` lines a strategy calls by name; a
strategy module stays the place where its algorithm is read."""

from __future__ import annotations

from typing import Any, Callable

from langgraph.graph import END, START, StateGraph

from coevo.meta.budget import ending, phased
from coevo.meta.context import MetaContext
from coevo.meta.state import MetaState
from coevo.nodes.check import check
from coevo.nodes.curate import curate
from coevo.nodes.edit import edit, fan_out
from coevo.nodes.schedule import final_test, more_rounds, next_round
from coevo.nodes.setup import setup


class PhasedGraph(StateGraph):
    """A ``StateGraph`` whose node functions run as budget phases (``coevo.meta.budget.phased``:
    the state's round and the node's name), so every strategy's spending is attributed per phase
    without a line in its nodes, and whose loops end once a rollout cap stopped the run (a router
    with a ``"done"`` branch goes there: ``coevo.meta.budget.ending``)."""

    def add_node(self, node: Any, action: Any = None, **kwargs: Any) -> Any:  # type: ignore[override]
        """``StateGraph.add_node`` with the node function ``phased`` under its node name."""
        if action is None and not isinstance(node, str):
            return super().add_node(phased(getattr(node, "__name__", ""), node), **kwargs)
        return super().add_node(node, phased(node, action) if action is not None else None, **kwargs)

    def add_conditional_edges(self, source: str, path: Any, path_map: Any = None) -> Any:  # type: ignore[override]
        """``StateGraph.add_conditional_edges``; a router whose ``path_map`` has a ``"done"`` branch
        takes it once the budget stopped the run."""
        if isinstance(path_map, dict) and "done" in path_map and callable(path):
            path = ending(path)
        return super().add_conditional_edges(source, path, path_map)


def meta_graph(test: Callable[..., Any] = final_test, state: type = MetaState) -> StateGraph:
    """A meta-loop ``StateGraph`` (state ``state``: the core ``MetaState`` or a family's extension
    of it; context ``MetaContext``; a ``PhasedGraph``) that starts with ``setup`` (H0, W0 and the
    run's tasks) and ends with ``final_test`` (``test``: by default the test of the start and final
    pairs; Harness-S passes its routed test); the strategy wires what lies between."""
    builder = PhasedGraph(state, context_schema=MetaContext)
    builder.add_node("setup", setup)
    builder.add_node("final_test", test)
    builder.add_edge(START, "setup")
    builder.add_edge("final_test", END)
    return builder


def add_refinement(builder: StateGraph, after: str, then: str | None = None, checked: bool = True) -> str:
    """H'[t] = refine(H[t], T[t]) after node ``after``: ``curate`` (directions) -> one ``edit`` per
    direction (``Send``) -> ``check`` (Harness-S Table 8), then to ``then`` when given. Returns the
    last node, ``"check"``. ``checked=False`` (VACE's ungated ablation: no check gate) leaves
    ``check`` out: the edits, or ``curate`` when there is no direction, go straight to ``then``."""
    builder.add_node("curate", curate)
    builder.add_node("edit", edit)
    builder.add_edge(after, "curate")
    if not checked:
        if then is None:
            raise ValueError("add_refinement(checked=False) needs then=: the node after the edits")
        builder.add_conditional_edges("curate", fan_out, {"edit": "edit", "check": then})
        builder.add_edge("edit", then)
        return "edit"
    builder.add_node("check", check)
    builder.add_conditional_edges("curate", fan_out, ["edit", "check"])
    builder.add_edge("edit", "check")
    if then is not None:
        builder.add_edge("check", then)
    return "check"


def add_rounds(builder: StateGraph, first: str, last: str | None) -> None:
    """``for t in rounds``: after ``last`` (None: the caller routes to it), ``next_round`` closes
    round t and goes back to ``first`` while rounds remain, else to ``final_test``."""
    builder.add_node("next_round", next_round)
    if last is not None:
        builder.add_edge(last, "next_round")
    builder.add_conditional_edges("next_round", more_rounds, {"continue": first, "done": "final_test"})
