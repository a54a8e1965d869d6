"""WHALE's state (WHALE, FST, stagewise): the search state (``coevo.meta.search.SearchState``) plus
the run's phase plan and the persistent sampler's position."""

from __future__ import annotations

from coevo.meta.search import Plan, SearchState


class WhaleState(SearchState, total=False):
    """``SearchState`` plus WHALE's phase plan and sampler position."""

    plan: Plan
    """Replaced once by the strategy's ``plan`` node (WHALE, FST or stagewise)."""
    sampler_position: int
    """Replaced by each weight phase: tasks drawn so far from the persistent sampler (WHALE §3.1)."""
