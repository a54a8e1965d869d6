"""Harness-S's fixed mixed-harness GRPO control ("Learning from Sibling Harnesses for Generalizable
Agent Training"; docs/papers.md, Table 1 "GRPO Mixed Harness (DSH H0 + Top-4)", Table 9, App. 8 "Fixed
mixed-harness GRPO"): Harness-S's evolution and pool, then GRPO whose every group mixes H0 with a fixed set of
selected siblings — "The same mixture is used across training tasks, without waiting for an all-failure base
group" — and no rescue; the policy is evaluated under H0 (and, as for Harness-S, under Rank-r routing)::

    P_1 = {H0}; directional evolution (frozen W0) -> the sibling pool              # as Harness-S
    for t in rounds:
        P^(s) = Profile(E_i^(s), E_0^(s))                                          # profile
        W[t+1] = GRPO(W[t], groups of K/2 x H0 + one rollout per selected sibling) # train (``mixed_train``)
    P^(*) = Profile(...); test H0 and Rank-1/2/3 routing with W[T]                 # reanchor, final_test

The siblings are the K - K/2 pool members with the best val success in the first stage's profiles
(Top-4 at K = 8), fixed for the run. Its rollout count equals plain GRPO's (Table 9: 100 %).
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.harness_s.baselines import mixed_train
from coevo.graphs.harness_s.harness_s import wire


def build() -> StateGraph:
    """Harness-S's wiring with the mixed-harness weight stage (uncompiled)."""
    return wire(mixed_train)


graph = build().compile(name="mixed_harness")
