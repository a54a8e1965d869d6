"""VACE's family (Algorithm 1 in ``shared/papers/vace_and_related_abstracts.txt``): VACE and its
baselines and ablation, static, harness_only, rl_only and ungated. Read ``vace.py`` (the algorithm
and its wiring) and ``nodes.py`` (the two nodes only this family uses); the state is the core
``coevo.meta.state.MetaState`` and the other nodes are shared (``coevo.nodes``)."""
