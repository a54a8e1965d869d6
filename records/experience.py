"""EvoHarness-RL's experience, persisted: one row per consolidation of a harness lineage's lessons
("Learning Runtime Harness Coordination for Self-Evolving Agents", arXiv:2608.05446: Experience
is the BPE state that outlives the episode). The archive stores them (``experience``); the lineage's current
lessons are those of its highest ``version`` (``coevo.harnesses.bpe.ArchiveExperience``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from coevo.records.fields import created
from coevo.timestamps import UTCTime


class ExperienceRecord(BaseModel):
    """The lessons of harness lineage ``lineage`` (the run's start harness id) after its ``version``-th
    consolidation (1 the first): ``lessons`` oldest first (deduplicated, capped), ``offered`` the
    lessons this consolidation was given, ``run_id`` and ``round`` where it was made. ``id``:
    ``<lineage>-v<version>``, so two writers of one version collide rather than fork the lineage."""

    id: str = ""
    run_id: str | None = None
    lineage: str
    version: int = Field(ge=1)
    round: int = 0
    lessons: list[str] = Field(default_factory=list)
    offered: list[str] = Field(default_factory=list)
    created_at: UTCTime = created()

    @model_validator(mode="before")
    @classmethod
    def _named(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("id") and "lineage" in data and "version" in data:
            data = {**data, "id": f"{data['lineage']}-v{data['version']}"}
        return data
