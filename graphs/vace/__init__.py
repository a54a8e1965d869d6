"""VACE's family (Algorithm 1 of "Validation-Gated Alternating CoEvolution"; docs/papers.md): VACE and its
baselines and ablation (Table 5), static, harness_only, rl_only, sia (the SIA-style stagewise row)
and ungated. Read ``vace.py`` (the algorithm and its wiring) and ``nodes.py`` (the nodes only this
family uses); the state is the core ``coevo.meta.state.MetaState`` and the other nodes are shared
(``coevo.nodes``)."""
