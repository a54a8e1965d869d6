"""coevo: co-evolve an LLM agent's harness and its model weights.

Public API for embedding::

    from coevo import load_harness, build_harness_graph
    from coevo import load_router, build_routed_graph   # Harness-S Rank-1 routing (imported on first use)
    from coevo import AgentParams, load_params           # your own LangGraph agent's evolved params
    from coevo import load_agent                         # an exported agent folder (coevo export RUN -o DIR)
"""

import os as _os

for _k, _v in {"HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LANGGRAPH_NO_VERSION_CHECK": "true",
               "LANGGRAPH_CLI_NO_ANALYTICS": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}.items():
    _os.environ.setdefault(_k, _v)

from coevo.harnesses import HarnessError, HarnessSpec, apply_patch, diff, load_harness, render  # noqa: E402
from coevo.harnesses.agent import AgentParams, load_params  # noqa: E402
from coevo.harnesses.runtime import arun_rollout, build_harness_graph  # noqa: E402

__all__ = ["AgentParams", "HarnessError", "HarnessSpec", "apply_patch", "arun_rollout", "build_harness_graph",
           "build_routed_graph", "diff", "load_agent", "load_harness", "load_params", "load_router", "render"]

_LAZY = {"build_routed_graph": "coevo.graphs.harness_s.routed", "load_router": "coevo.app.bundle",
         "load_agent": "coevo.app.release"}


def __getattr__(name: str):
    """``build_routed_graph``, ``load_router`` and ``load_agent``, imported on first use (Harness-S's router
    and an exported agent's loader pull in the meta loop's modules, which ``import coevo`` alone should not)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'coevo' has no attribute {name!r}")
