"""Harness-S's harness-evolution-only variant (frozen policy W0, Rank-1 routing)::

    P_1 = {H0}; for g in evolution rounds:
        T_g = sample(W0, P_g, D_train)                                # sample_parents
        C_g = {Edit(H, d)}; check                                     # curate_briefs -> edit (Send) -> check
        H_g = H_{g-1} ∪ C_g^valid;  P_{g+1} = argmax coverage         # select_parents (Eq. 3, 4)
    P = Profile(E_i, E_0) under W0                                    # profile (Eq. 11)
    test H0 and Rank-1/2/3 routing under W0                           # final_test (Eq. 12)

Both Harness-S strategies share ``coevo.graphs.harness_s.harness_s.add_evolution`` and end in the
routed test (``meta_graph(test=routed_test)``).
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.harness_s.harness_s import add_evolution
from coevo.graphs.harness_s.routing import profile, routed_test
from coevo.graphs.harness_s.state import HarnessSState
from coevo.nodes.loop import meta_graph


def build() -> StateGraph:
    """The frozen-policy wiring (uncompiled)."""
    builder = meta_graph(test=routed_test, state=HarnessSState)
    # P_1 = {H0}; directional evolution with the frozen policy
    add_evolution(builder, after="setup", then="profile")
    builder.add_node("profile", profile)
    # P = Profile(E_i, E_0) under W0, then test H0 and Rank-1/2/3 routing
    builder.add_edge("profile", "final_test")
    return builder


graph = build().compile(name="harness_s_he_only")
