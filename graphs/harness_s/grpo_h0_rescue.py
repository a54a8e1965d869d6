"""Harness-S's "GRPO (H0 rescue)" control ("Learning from Sibling Harnesses for Generalizable Agent
Training"; docs/papers.md, Table 1, Table 9 and App. 8 "GRPO and H0 rescue"): the shared optimizer under H0
with Eq. 5's all-failure trigger and per-task allocation, but the failed group is replaced by K fresh rollouts
under H0 itself — no sibling pool, no router, no harness evolution::

    for t in rounds:
        W[t+1] = GRPO(W[t], H0, rescue under H0)        # train (``h0_rescue_train``)
    test (H0, W0) and (H0, W[T])                         # final_test

It separates Harness-S's gain from "additional sampling" (§4.2: "Harness-S outperforms plain GRPO
and GRPO with H0 rescue ..., indicating a benefit beyond additional sampling"); its total sampling
grows with the rescue frequency, as the paper notes.
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.harness_s.baselines import h0_rescue_train
from coevo.nodes.loop import add_rounds, meta_graph


def build() -> StateGraph:
    """The H0-rescue wiring (uncompiled)."""
    builder = meta_graph()
    builder.add_node("train", h0_rescue_train)
    # W[t+1] = GRPO(W[t], H0, rescue under H0)
    builder.add_edge("setup", "train")
    # for t in rounds
    add_rounds(builder, first="train", last="train")
    return builder


graph = build().compile(name="grpo_h0_rescue")
