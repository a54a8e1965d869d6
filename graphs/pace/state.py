"""PACE's state: the search state (``coevo.meta.search.SearchState``) plus its phase plan and the
kind of the phase running now (prompt, then control)."""

from __future__ import annotations

from typing import Literal

from coevo.meta.search import Plan, SearchState


class PaceState(SearchState, total=False):
    """``SearchState`` plus PACE's plan and running phase kind."""

    plan: Plan
    """Replaced once by ``pace_plan``."""
    phase_kind: Literal["prompt", "control"]
    """Replaced: the timescale running now (``pace_plan`` starts with ``prompt``, ``pace_step``
    switches to ``control``)."""
