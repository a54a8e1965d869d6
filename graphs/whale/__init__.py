"""WHALE's family (``shared/papers/whale.txt``): WHALE, FST (its prompt-only control) and stagewise
(the whole weight budget, then the whole search budget). Read ``whale.py`` (the algorithm and its
wiring), ``nodes.py`` (the plans, the weight phase, ``accept``) and ``state.py``; the search nodes
are shared with PACE (``coevo.nodes.search``)."""
