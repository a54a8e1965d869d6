"""The strategies' graphs as LangGraph Studio serves them (``langgraph.json`` points here, one
entry per row of the strategy table): each strategy's compiled ``graph`` bound to a default
context (``coevo.compat.bind_context``, as ``coevo.harnesses.runtime.build_harness_graph`` binds
the harness graph), so ``graph.invoke(input)`` with no context runs on default services.

The default context of strategy ``s`` is ``make_context(RunConfig(strategy=s, **STUDIO_KEYS.get(s, {})),
Archive(config.db), run_id="studio")``, built on first use (``DefaultContext``): importing this module loads no model
and opens no database. A caller that passes its own ``MetaContext`` as ``context`` gets it instead.
"""

from __future__ import annotations

from typing import Any

from coevo.compat import bind_context
from coevo.config import RunConfig
from coevo.graphs.registry import STRATEGIES, get_strategy
from coevo.meta.context import MetaContext

STUDIO_KEYS: dict[str, dict[str, Any]] = {"evoharness_rl": {"train": {"action_cost": 0.5}}}
"""What a strategy needs set beyond ``RunConfig``'s defaults to run at all: EvoHarness-RL refuses to run without
its λ (``train.action_cost``), so Studio's graph takes its preset's 0.5 (``configs/papers/evoharness_rl.toml``)."""


def studio_config(strategy: str) -> RunConfig:
    """The run config of ``strategy``'s Studio graph: ``RunConfig`` defaults with ``STUDIO_KEYS``'."""
    return RunConfig(strategy=strategy, **STUDIO_KEYS.get(strategy, {}))


class DefaultContext:
    """The default services of strategy ``strategy``'s Studio graph: a ``MetaContext`` built from
    ``RunConfig(strategy=strategy)`` defaults when a node first reads an attribute, then every
    attribute read from it."""

    def __init__(self, strategy: str) -> None:
        self.strategy = strategy
        self._built: MetaContext | None = None

    def built(self) -> MetaContext:
        """The context (built once; raises whatever building the default services raises, e.g. a
        missing model cache)."""
        if self._built is None:
            from coevo.app.services import make_context
            from coevo.storage import Archive

            config = studio_config(self.strategy)
            self._built = make_context(config, Archive(config.db), run_id="studio")
        return self._built

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.built(), name)


def studio_graph(name: str) -> Any:
    """Strategy ``name``'s compiled graph (its module's ``graph``: no recompile) bound to a
    ``DefaultContext``. Raises ``ValueError`` for an unknown strategy."""
    return bind_context(get_strategy(name).graph(), DefaultContext(name))


globals().update({name: studio_graph(name) for name in STRATEGIES})
