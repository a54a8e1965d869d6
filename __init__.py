"""coevo: co-evolve an LLM agent's harness and its model weights.

Public API for embedding::

    from coevo import load_harness, build_harness_graph
"""

import os as _os

for _k, _v in {"HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LANGGRAPH_NO_VERSION_CHECK": "true",
               "LANGGRAPH_CLI_NO_ANALYTICS": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}.items():
    _os.environ.setdefault(_k, _v)

from coevo.graphs.harness import arun_rollout, build_harness_graph  # noqa: E402
from coevo.harnesses import HarnessError, HarnessSpec, apply_patch, diff, load_harness, render  # noqa: E402

__all__ = ["HarnessError", "HarnessSpec", "apply_patch", "arun_rollout", "build_harness_graph", "diff", "load_harness",
           "render"]
