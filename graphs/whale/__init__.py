"""WHALE's family ("A Simple Recipe for Joint Harness-Weight Optimization", arXiv:2609.00196): WHALE,
FST (its prompt-only control), stagewise (the whole weight budget, then the whole search budget) and the
single-component baselines at matched cumulative budgets (whale_weight_only: RSFT alone; whale_harness_only:
Meta-Harness alone). Read ``whale.py`` (the algorithm and its wiring) and ``nodes.py`` (its state, the plans, the
weight phase, ``accept``); the search nodes are shared with PACE (``coevo.nodes.search``), the loop's
with every family (``coevo.nodes.loop``)."""
