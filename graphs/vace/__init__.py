"""VACE's family (Algorithm 1 of "Validation-Gated Alternating CoEvolution"; docs/papers.md): VACE and its
baselines and ablation (Table 5), static, harness_only, rl_only, sia (the SIA-style stagewise row)
and ungated. Read ``vace.py`` (the algorithm, its wiring and ``stage_effect``, the weight stage's
own effect); each baseline's module holds the node only it uses (``ungated.py``: ``adopt``; ``sia.py``:
``stagewise_rounds``). The state is the core ``coevo.meta.state.MetaState``; the other nodes are
shared: the loop's phases in ``coevo.nodes.loop``, the refinement's in ``coevo.nodes.refine``."""
