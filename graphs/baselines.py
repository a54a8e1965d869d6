"""The papers' baselines that need nothing new: the VACE nodes with parts of the wiring off
(DESIGN.md strategy table)."""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.vace import build

WIRINGS: dict[str, dict[str, bool]] = {
    "vace": {"trains": True, "refines": True, "gated": True},
    "static": {"trains": False, "refines": False, "gated": False},
    "harness_only": {"trains": False, "refines": True, "gated": True},
    "rl_only": {"trains": True, "refines": False, "gated": False},
    "ungated": {"trains": True, "refines": True, "gated": False},
}


def builder_for(strategy: str) -> StateGraph:
    """The uncompiled graph of ``strategy``. Raises ``ValueError`` naming the valid strategies."""
    if strategy not in WIRINGS:
        raise ValueError(f"unknown strategy {strategy!r}; one of {sorted(WIRINGS)}")
    return build(**WIRINGS[strategy])


static = builder_for("static").compile(name="static")
harness_only = builder_for("harness_only").compile(name="harness_only")
rl_only = builder_for("rl_only").compile(name="rl_only")
ungated = builder_for("ungated").compile(name="ungated")
