"""The agent graph for Studio and embedding: the harness runtime (``coevo.harnesses.runtime``) re-exported,
so ``langgraph.json`` and ``from coevo.graphs.harness import build_harness_graph`` keep working."""

from coevo.harnesses.runtime import (
    EngineContext,
    HarnessState,
    arun_rollout,
    build_harness_graph,
    builder,
    graph,
    recursion_limit,
    to_trajectory,
)

__all__ = ["HarnessState", "EngineContext", "builder", "graph", "recursion_limit", "build_harness_graph",
           "to_trajectory", "arun_rollout"]
