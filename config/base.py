"""What every config section shares: unknown keys are errors; and the reward modes a suite scores with."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

RewardMode = Literal["correct", "partial"]
"""How a suite scores an answer: ``correct`` (1 when its checker passes it, else 0) or ``partial``
(the checker's partial credit)."""


class Section(BaseModel):
    """A config section: unknown keys are errors (a typo never passes silently)."""

    model_config = ConfigDict(extra="forbid")
