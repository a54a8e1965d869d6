"""The strategy table's derived files: ``langgraph.json`` lists every strategy of the table
(``coevo.strategies``, re-exported here) with the Studio graph ``coevo.app.studio`` binds to a
default context, and the graphs that are not strategies (the demo agent, Harness-S's routed demo
and its voting graph). ``python -m coevo.graphs.registry`` rewrites it; a unit test fails when the
file and the table disagree."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from coevo.strategies import STRATEGIES, STUDIO, Strategy, get_strategy, strategy_names

__all__ = ["OTHER_GRAPHS", "STRATEGIES", "STUDIO", "Strategy", "get_strategy", "langgraph_config", "strategy_names",
           "write_langgraph_json"]

ROOT = Path(__file__).resolve().parents[1]

OTHER_GRAPHS: dict[str, str] = {"harness_demo": "./graphs/demo.py:graph",
                                 "harness_s_routed": "./graphs/harness_s/routed.py:graph",
                                 "router": "./graphs/harness_s/router.py:graph"}
"""``langgraph.json`` graphs that are not strategies (the demo agent, Harness-S's routed demo and its voting graph)."""


def langgraph_config(current: dict[str, Any] | None = None) -> dict[str, Any]:
    """``langgraph.json``'s content: ``current``'s other keys kept, ``graphs`` = the other graphs
    and one entry per strategy (in table order)."""
    config = dict(current or {"dependencies": ["."], "env": {}})
    config["graphs"] = {**OTHER_GRAPHS, **{s.name: s.langgraph_entry for s in STRATEGIES.values()}}
    return config


def write_langgraph_json(path: Path = ROOT / "langgraph.json") -> bool:
    """Rewrite ``path`` from the table; returns whether its content changed."""
    before = path.read_text() if path.exists() else ""
    after = json.dumps(langgraph_config(json.loads(before) if before else None), indent=2) + "\n"
    if after != before:
        path.write_text(after)
    return after != before


if __name__ == "__main__":  # python -m coevo.graphs.registry [PATH]: regenerate langgraph.json
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "langgraph.json"
    print(f"{target}: {'rewritten' if write_langgraph_json(target) else 'already up to date'}")
