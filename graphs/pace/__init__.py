"""PACE's family (Prompt And Control Logic Evolution; its abstract;
docs/papers.md): PACE and its single-mode baselines
(pace_prompt_only, pace_control_only). Read ``pace.py`` (the algorithm and its wiring) and ``nodes.py``
(its state, the plans and the phase switch); the search nodes (``coevo.nodes.search``) and the loop's
validate, gate and round nodes (``coevo.nodes.loop``) are shared."""
