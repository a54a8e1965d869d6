"""CoEvo-RSI's Latest-only ablation ("When Harnesses Evolve, Which Models
Should Follow?", Figure 4; docs/papers.md): the CoEvo-RSI
wiring with A<t restricted to the incumbent harness and the current checkpoint, so editors can
only edit the incumbent and the model proposals can only select the current checkpoint."""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.coevo_rsi.coevo_rsi import wire
from coevo.graphs.coevo_rsi.harness_inheritance import survey_latest


def build() -> StateGraph:
    """The Latest-only wiring (uncompiled)."""
    return wire(survey_latest)


graph = build().compile(name="coevo_rsi_latest_only")
