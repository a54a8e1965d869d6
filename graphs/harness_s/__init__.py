"""Harness-S's family (``shared/papers/harness_s.txt`` §3.2-3.4): Harness-S and its
harness-evolution-only variant, the router (Eq. 9-10) and the routed app graph (Eq. 12). Read
``harness_s.py`` (the algorithm and its wiring), ``evolution.py`` (directional evolution: sample,
briefs, select parents), ``routing.py`` (profiles, rescue training, the routed test) and
``state.py``; ``router.py`` is the voting graph and its ``Router`` service, ``routed.py`` the
Rank-1 app graph."""
