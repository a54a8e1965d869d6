"""Harness-S ("Learning from Sibling Harnesses for Generalizable Agent Training"; docs/papers.md,
§3.2-3.4, Alg. 1) as a LangGraph graph::

    P_1 = {H0}; for g in evolution rounds (frozen W0):               # directional evolution (§3.2)
        T_g  = sample(W0, P_g, D_train)                               # sample_parents
        C_g  = {Edit(H, d) : H in P_g, d in D_g(H)}                   # curate_briefs -> edit (Send) -> check (Eq. 2)
        H_g  = H_{g-1} ∪ C_g^valid;  P_{g+1} = argmax coverage        # select_parents (Eq. 3, 4)
    for t in rounds:                                                  # complementary rescue training (Alg. 1)
        P^(s) = Profile(E_i^(s), E_0^(s))                             # profile: re-anchor (Eq. 11)
        W[t+1] = GRPO(W[t], H0, rescue under the router's top-K)      # train (``rescue_train``, Eq. 5, 10)
    P^(*) = Profile(...) with the final policy                        # reanchor
    test H0 and Rank-1/2/3 routing with W[T]                          # final_test (Eq. 12, Table 5)
"""

from __future__ import annotations

from typing import Awaitable, Callable

from langgraph.graph import StateGraph

from coevo.graphs.harness_s.evolution import (
    curate_briefs,
    fan_out_briefs,
    more_evolution,
    sample_parents,
    select_parents,
)
from coevo.graphs.harness_s.routing import profile, rescue_train, routed_test
from coevo.graphs.harness_s.state import HarnessSState
from coevo.nodes.loop import meta_graph, more_rounds, next_round
from coevo.nodes.refine import check, edit


def add_evolution(builder: StateGraph, after: str, then: str) -> None:
    """Harness-S directional evolution (§3.2, Eq. 2-4) after node ``after``, going to ``then`` when its
    rounds are done: sample_parents -> curate_briefs -> edit per brief (``Send``) -> check ->
    select_parents -> loop."""
    builder.add_node("sample_parents", sample_parents)
    builder.add_node("curate_briefs", curate_briefs)
    builder.add_node("edit", edit)
    builder.add_node("check", check)
    builder.add_node("select_parents", select_parents)
    # T_g = sample(W0, P_g, D_train)
    builder.add_edge(after, "sample_parents")
    # C_g = {Edit(H, d) : H in P_g, d in D_g(H)}, checked (Eq. 2)
    builder.add_edge("sample_parents", "curate_briefs")
    builder.add_conditional_edges("curate_briefs", fan_out_briefs, ["edit", "check"])
    builder.add_edge("edit", "check")
    # H_g = H_{g-1} ∪ C_g^valid; P_{g+1} = argmax coverage (Eq. 3, 4)
    builder.add_edge("check", "select_parents")
    builder.add_conditional_edges("select_parents", more_evolution, {"continue": "sample_parents", "done": then})


def wire(train: Callable[..., Awaitable[dict]]) -> StateGraph:
    """Harness-S's wiring with ``train`` as its weight stage (``rescue_train``; the comparison
    variants' stages in ``coevo.graphs.harness_s.baselines``), uncompiled."""
    builder = meta_graph(test=routed_test, state=HarnessSState)
    # P_1 = {H0}; directional evolution with frozen weights
    add_evolution(builder, after="setup", then="profile")
    builder.add_node("profile", profile)
    builder.add_node("train", train)
    builder.add_node("next_round", next_round)
    builder.add_node("reanchor", profile)
    # P^(s) = Profile(E_i^(s), E_0^(s)), then W[t+1] = GRPO(W[t], H0, rescue under the router's top-K)
    builder.add_edge("profile", "train")
    builder.add_edge("train", "next_round")
    # for t in rounds; then P^(*) = Profile(...) with the final policy
    builder.add_conditional_edges("next_round", more_rounds, {"continue": "profile", "done": "reanchor"})
    # test H0 and Rank-1/2/3 routing with W[T]
    builder.add_edge("reanchor", "final_test")
    return builder


def build() -> StateGraph:
    """Harness-S's wiring (uncompiled)."""
    return wire(rescue_train)


graph = build().compile(name="harness_s")
