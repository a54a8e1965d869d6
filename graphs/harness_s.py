"""Harness-S (``shared/papers/harness_s.txt``, §3.2-3.4, Alg. 1) as a LangGraph graph::

    P_1 = {H0}; for g in evolution rounds (frozen W0):               # directional evolution (§3.2)
        T_g  = sample(W0, P_g, D_train)                               # sample_parents
        C_g  = {Edit(H, d) : H in P_g, d in D_g(H)}                   # curate (briefs) -> edit (Send) -> check (Eq. 2)
        H_g  = H_{g-1} ∪ C_g^valid;  P_{g+1} = argmax coverage        # select_parents (Eq. 3, 4)
    for t in rounds:                                                  # complementary rescue training (Alg. 1)
        P^(s) = Profile(E_i^(s), E_0^(s))                             # profile: re-anchor (Eq. 11)
        W[t+1] = GRPO(W[t], H0, rescue under the router's top-K)      # train (``rescue_train``, Eq. 5, 10)
    P^(*) = Profile(...) with the final policy                        # reanchor
    test H0 and Rank-1/2/3 routing with W[T]                          # final_test (Eq. 12, Table 5)
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.wiring import add_evolution, meta_graph
from coevo.nodes.profile import profile
from coevo.nodes.route import rescue_train, routed_test
from coevo.nodes.schedule import more_rounds, next_round


def build() -> StateGraph:
    """Harness-S's wiring (uncompiled)."""
    builder = meta_graph(test=routed_test)
    # P_1 = {H0}; directional evolution with frozen weights
    add_evolution(builder, after="setup", then="profile")
    builder.add_node("profile", profile)
    builder.add_node("train", rescue_train)
    builder.add_node("next_round", next_round)
    builder.add_node("reanchor", profile)
    # re-anchor profiles, then one weight stage with complementary rescue, for t in rounds
    builder.add_edge("profile", "train")
    builder.add_edge("train", "next_round")
    builder.add_conditional_edges("next_round", more_rounds, {"continue": "profile", "done": "reanchor"})
    # profiles of the final policy, then test under H0 and Rank-1/2/3
    builder.add_edge("reanchor", "final_test")
    return builder


graph = build().compile(name="harness_s")
