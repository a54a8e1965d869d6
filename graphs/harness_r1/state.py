"""Harness-R1's state: the core loop state plus the engineer's checkpoint and one summary per
engineer stage."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from coevo.meta.state import MetaState


class HarnessR1State(MetaState, total=False):
    """``MetaState`` plus the engineer."""

    engineer: str
    """Replaced by each engineer stage: the engineer's current checkpoint id (in the archive)."""
    engineer_stages: Annotated[list[dict[str, Any]], operator.add]
    """Appended by each engineer stage: round, SFT examples, GRPO reward per step, patch validity."""
