"""EvoHarness-RL ("Learning Runtime Harness Coordination for Self-Evolving Agents", arXiv:2608.05446): the policy
learns to build and use Belief-Progress-Experience harness state through costed harness actions,
trained with cost-aware GRPO; between stages the harness evolves (experience consolidated and
summarised, progress schema refined)::

    H_BPE = H0 + BPE state (read / update belief / update progress / consolidate, each with a cost)
    W[0] = SFT(W[0], H_BPE, BPE-using turns of the teacher's rollouts)   # evoharness.sft_steps rounds
    for t in rounds:
        W[t+1], T[t] = GRPO(W[t], H_BPE, D_train, E)   # r = task reward - lambda x action cost
        E = summarise(E + lessons of the successful T[t])   # dedup, near-dup merge (or the LLM), cap
        H_BPE.progress_schema = subgoals done in >= 2 tasks' successful T[t]   # when changed: a child

lambda is ``train.action_cost``; the stage's metrics log task reward, harness cost, shaped reward,
harness-action rate per turn, reads, writes and state size (``coevo.training.grpo.harness_cost``).
The SFT stage plays under H_BPE (RSFT) and trains only on turns that made a BPE action: the
scripted teacher's demonstrations of the train tasks (``evoharness.teacher``, the default;
``coevo.training.evoharness.teacher``: a small policy never calls the actions), else the policy's own samples.
E is kept in the archive per lineage (``coevo.harnesses.bpe.ArchiveExperience``); ``summarise`` is
the run's summariser (``coevo.roles.summariser``: offline, or the LLM role when ``meta.model`` is a
model, its rejected replies replaced by the offline summary); a refined progress schema is stored as
the incumbent's child (origin ``progress_schema``) whose episodes start with those subgoals pending.
The BPE settings are a harness component like any other: an editor may change them (the offline
operator ``bpe_settings``, ``coevo.roles.operators.bpe``).
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.evoharness.nodes import consolidate, equip, harness_sft, refine_progress, train_bpe
from coevo.nodes.loop import add_rounds, meta_graph


def build() -> StateGraph:
    """The EvoHarness-RL wiring (uncompiled)."""
    builder = meta_graph()
    builder.add_node("equip", equip)
    builder.add_node("harness_sft", harness_sft)
    builder.add_node("train", train_bpe)
    builder.add_node("consolidate", consolidate)
    builder.add_node("refine_progress", refine_progress)
    # H_BPE = H0 + BPE state
    builder.add_edge("setup", "equip")
    builder.add_edge("equip", "harness_sft")
    # W[0] = SFT(W[0], H_BPE, BPE-using turns)
    builder.add_edge("harness_sft", "train")
    # W[t+1], T[t] = GRPO(W[t], H_BPE, D_train, E); E = summarise(E + T[t])
    builder.add_edge("train", "consolidate")
    # H_BPE.progress_schema = subgoals done in >= 2 tasks' successful T[t]
    builder.add_edge("consolidate", "refine_progress")
    # for t in rounds
    add_rounds(builder, first="train", last="refine_progress")
    return builder


graph = build().compile(name="evoharness_rl")
