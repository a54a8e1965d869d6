"""Harness-S with random rescue allocation ("Learning from Sibling Harnesses for Generalizable Agent
Training"; docs/papers.md, Table 2, "Random Harness samples pool members"): Harness-S's directional evolution,
sibling pool, profiles and routed test, with the rescue group of an all-failure task run under pool members
drawn at random instead of the router's top-K (Eq. 10)::

    P_1 = {H0}; directional evolution (frozen W0) -> the sibling pool              # as Harness-S
    for t in rounds:
        P^(s) = Profile(E_i^(s), E_0^(s))                                          # profile
        W[t+1] = GRPO(W[t], H0, rescue under K random pool members)                # train (``random_rescue_train``)
    P^(*) = Profile(...); test H0 and Rank-1/2/3 routing with W[T]                 # reanchor, final_test

It isolates what task-specific allocation adds (§4.3: "Both rule-based and LLM-guided strategies
outperform random selection throughout training").
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.harness_s.baselines import random_rescue_train
from coevo.graphs.harness_s.harness_s import wire


def build() -> StateGraph:
    """Harness-S's wiring with the random-rescue weight stage (uncompiled)."""
    return wire(random_rescue_train)


graph = build().compile(name="random_rescue")
