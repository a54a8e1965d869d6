"""Every reach under a framework's public API, in one package, each with its reason.

Each lives in this package (a module per framework: ``langgraph``, ``langchain``, ``trl``,
``transformers``, ``verifiers``; each name re-exported here, so ``from coevo.compat import X``)
and nowhere else in coevo; ``tests/unit/test_compat.py`` (LangGraph,
LangChain) and ``tests/unit/test_compat_training.py`` (TRL, transformers) check that each behaves
like the public path it replaces, on the versions ``pyproject.toml`` bounds (langgraph 1.2,
langchain-core 1.8, trl 1.16, transformers 5.24): widen a bound only after those tests pass on
the new release.

- ``node`` / ``route``: LangGraph's own node wrapper ``RunnableCallable`` with an async twin and no
  tracing per step (``langgraph._internal``).
- ``bind_context``: a compiled graph that carries its run context (LangGraph has no public way yet).
- ``with_checkpointer`` / ``state_schemas``: a strategy's graph, compiled once at import, given a run's
  checkpointer (``Pregel.copy``) and its state schemas (the compiled graph's ``builder``).
- ``areply``: an unobserved chat model's ``_agenerate`` called directly (``BaseChatModel`` private).
- ``arun_state``: a compiled graph's nodes, routers and reducers run in a plain loop (reads the
  builder's ``nodes``/``branches``/``edges``, which LangGraph does not document).
- ``bind_tools_within`` / ``unbind`` / ``innermost``: a ``RunnableBinding``'s ``bound``/``kwargs``/``config`` fields.
- ``detached``: LangChain's context variable of the parent runnable config (``var_child_runnable_config``).
- ``GRPOBatchHook``: TRL's ``GRPOTrainer._generate_and_score_completions`` answered by coevo's
  own batch, with TRL's private per-token log-probs and metric store; its private scoring
  (``_get_per_token_logps_and_entropies``) optionally served by a packed scorer.
- ``route_tensorboard``: the ``logging_dir`` attribute of transformers' ``TensorBoardCallback``.
- ``vf_config_type``, ``vf_bare_env``, ``vf_trace_stops``, ``vf_tool_methods``, ``vf_tool_call``: verifiers' v1
  internals the verifiers adapter (``coevo.envs.verifiers_adapter``) plays a taskset through without
  verifiers' harness, runtime and MCP servers: a plugin class's config type, an ``Env`` made without its
  harness and runtime loading, a task's trace-typed ``@vf.stop`` predicates, and a ``Toolset``'s tools
  called in process on the rollout's state (verifiers 0.4.0).
"""

from __future__ import annotations

from coevo.compat.langchain import areply, bind_tools_within, detached, innermost, unbind
from coevo.compat.langgraph import (
    ContextBoundGraph,
    arun_state,
    bind_context,
    node,
    route,
    state_schemas,
    with_checkpointer,
)
from coevo.compat.transformers import route_tensorboard
from coevo.compat.trl import GRPOBatchHook
from coevo.compat.verifiers import VfBareEnv, vf_bare_env, vf_config_type, vf_tool_call, vf_tool_methods, vf_trace_stops

__all__ = ["ContextBoundGraph", "GRPOBatchHook", "VfBareEnv", "areply", "arun_state", "bind_context",
           "bind_tools_within", "detached", "innermost", "node", "route", "route_tensorboard", "state_schemas",
           "unbind", "vf_bare_env", "vf_config_type", "vf_tool_call", "vf_tool_methods", "vf_trace_stops",
           "with_checkpointer"]
