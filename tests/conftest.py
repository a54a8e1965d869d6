"""Test-wide settings: offline env vars before anything imports a hub client, and a temp cache dir."""

import os

for key, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                   "LANGGRAPH_NO_VERSION_CHECK": "true", "LANGGRAPH_CLI_NO_ANALYTICS": "1",
                   "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(key, value)
