"""Harness-R1's state: the core loop state plus the engineer's checkpoint and one summary per
engineer stage."""

from __future__ import annotations

import operator
from typing import Annotated

from pydantic import BaseModel

from coevo.meta.state import MetaState


class EngineerStage(BaseModel):
    """One engineer stage in numbers: its ``round``; ``sft_examples`` the cold-start SFT examples
    (None: no cold start this round); ``rewards`` each GRPO step's mean reward (success change,
    patched minus unpatched rerun, penalty for invalid patches); ``patches`` sampled and ``valid``
    among them; ``valid_reward`` the valid patches' mean reward (None: none valid)."""

    round: int
    sft_examples: int | None = None
    rewards: list[float | None] = []
    patches: int = 0
    valid: int = 0
    valid_reward: float | None = None


class HarnessR1State(MetaState, total=False):
    """``MetaState`` plus the engineer."""

    engineer: str
    """Replaced by each engineer stage: the engineer's current checkpoint id (in the archive)."""
    engineer_stages: Annotated[list[EngineerStage], operator.add]
    """Appended by each engineer stage: round, SFT examples, GRPO reward per step, patch validity."""
