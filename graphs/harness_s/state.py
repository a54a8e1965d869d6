"""Harness-S's state: the core ``MetaState`` plus the directional evolution's parents, briefs,
sibling pool and round, and the pool's profiles (Harness-S §3.2-3.4; docs/papers.md)."""

from __future__ import annotations

import operator
from typing import Annotated

from coevo.meta.pool import Brief, PoolMember, Profile
from coevo.meta.state import MetaState


class HarnessSState(MetaState, total=False):
    """``MetaState`` plus Harness-S's keys."""

    parents: list[str]
    """Replaced by ``select_parents``: the parents P_g of the next evolution round (Eq. 3)."""
    briefs: list[Brief]
    """Replaced each evolution round by ``curate_briefs``: the candidates' briefs (Eq. 2)."""
    pool: Annotated[list[PoolMember], operator.add]
    """Accumulated (``operator.add``): the sibling pool H_g (Eq. 4), H0 first."""
    profiles: dict[str, Profile]
    """Replaced at each re-anchoring by ``profile``: the pool's profiles by harness id (Eq. 11)."""
    evolution_round: int
    """Replaced: the directional-evolution round g being run (0-based)."""
    mixture: list[str]
    """Replaced once by ``mixed_train`` (the mixed-harness control): the siblings every group mixes with H0."""
