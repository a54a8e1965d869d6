"""PACE's family (Prompt And Control Logic Evolution; abstract in
``shared/papers/vace_and_related_abstracts.txt``): read ``pace.py`` (the algorithm and its wiring),
``nodes.py`` (its plan and the phase switch) and ``state.py``; the search, validate and gate nodes
are shared (``coevo.nodes``)."""
