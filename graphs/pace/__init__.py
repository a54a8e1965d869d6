"""PACE's family (Prompt And Control Logic Evolution; its abstract;
docs/papers.md): PACE and its single-mode baselines
(pace_prompt_only, pace_control_only). Read ``pace.py`` (the algorithm and its wiring), ``nodes.py``
(the plans and the phase switch) and ``state.py``; the search, validate and gate nodes are shared
(``coevo.nodes``)."""
