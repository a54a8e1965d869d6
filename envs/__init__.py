"""coevo.envs: task suites with automatic verifiers (docs/design.md, Task and Env).

``get_env("reasoning_gym:size=60")`` builds a suite; ``available()`` lists them (built-ins and the
entry-point group ``coevo.envs``); ``redact_for_meta`` cuts val/test scoring diagnostics before they
reach meta roles. Suites import their packages lazily.
"""

from coevo.envs.base import SPLITS, Env, Episode, Score, Split, Task, Tool
from coevo.envs.redact import redact_detail, redact_for_meta
from coevo.envs.registry import available, get_env, parse_ref
from coevo.errors import MissingExtraError

__all__ = ["SPLITS", "Env", "Episode", "MissingExtraError", "Score", "Split", "Task", "Tool", "available", "get_env",
           "parse_ref", "redact_detail", "redact_for_meta"]
