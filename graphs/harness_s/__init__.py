"""Harness-S's family ("Learning from Sibling Harnesses for Generalizable Agent Training";
docs/papers.md, §3.2-3.4): Harness-S and its harness-evolution-only variant, its comparison variants
(grpo_h0_rescue, random_rescue, mixed_harness; Table 1, Table 2, App. 8), the router (Eq. 9-10) and the routed
app graph (Eq. 12). Read ``harness_s.py`` (the algorithm and its wiring), ``evolution.py`` (directional
evolution: sample, briefs, select parents), ``routing.py`` (profiles, rescue training, the routed test),
``baselines.py`` (the variants' weight stages) and ``state.py``; ``router.py`` is the voting graph
and its ``Router`` service, ``routed.py`` the Rank-1 app graph."""
