"""CoEvo-RSI's persisted models (docs/papers.md, §Harness Inheritance, §Model Inheritance and
Selection): each editor's chosen base, each model proposal and the round's promotion. The same
objects travel in the meta state and the archive stores them (``base_choices``, ``model_proposals``,
``promotions``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from coevo.records.fields import created, new_id
from coevo.timestamps import UTCTime


class BaseChoice(BaseModel):
    """An editor's inherited base (Harness Inheritance: ``i_{t,k}`` and ``U_{t,k}``): the ``index`` it
    named in the archive summary A<t it saw, the base harness id, why, and the ``direction`` (brief)
    it serves. Once the run records it: the ``round``, the incumbent then (``incumbent_id``), the
    candidate it became (``candidate_id``, ``child_id`` once applied) and the ``evidence`` the
    editor was shown (the direction and the summary rows)."""

    id: str = Field(default_factory=new_id)
    run_id: str | None = None
    round: int = 0
    direction: str
    index: int
    base_id: str
    incumbent_id: str = ""
    candidate_id: str = ""
    child_id: str | None = None
    reason: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)
    created_at: UTCTime = created()


class ModelProposal(BaseModel):
    """One model initialisation for an offspring harness (Model Inheritance, steps 1-4) in ``round``:
    ``kind`` ``select`` (one-hot alpha over one archived checkpoint) or ``merge`` (TIES over
    ``sources`` with coefficients ``alpha``, >= 0, summing to 1). ``checkpoint_id`` is the selected
    or merged checkpoint once it exists; ``status`` ``proposed`` -> ``scored`` (``val``/``timr`` on
    the validation split, ``evaluation_id``) or ``refused`` (``reason``: e.g. a merge of adapters
    whose ranks differ, refused before any file was written)."""

    id: str
    run_id: str | None = None
    round: int = 0
    harness_id: str
    kind: Literal["select", "merge"]
    sources: list[str]
    alpha: list[float]
    checkpoint_id: str | None = None
    status: Literal["proposed", "scored", "refused"] = "proposed"
    reason: str = ""
    val: float | None = None
    timr: float | None = None
    evaluation_id: str | None = None
    created_at: UTCTime = created()


class PairScore(BaseModel):
    """A (harness, checkpoint) pair with its validation score and TIMR (None: not evaluated)."""

    harness_id: str
    checkpoint_id: str
    val: float | None = None
    timr: float | None = None


class Promotion(BaseModel):
    """The promotion of ``round`` (Model Inheritance, step 6): the incumbent pair p_t, the best
    proposal p̄_t and the adapted proposal p⁺_t on validation; the better challenger replaces p_t iff
    its score exceeds p_t's by more than ``margin`` (δ_prom, ``accepted``). The pair kept is
    (``harness_id``, ``checkpoint_id``): ``promoted`` with its scores."""

    id: str = Field(default_factory=new_id)
    run_id: str | None = None
    round: int
    harness_id: str
    checkpoint_id: str
    accepted: bool = False
    margin: float = 0.0
    reason: str = ""
    incumbent: PairScore
    best: PairScore | None = None
    adapted: PairScore | None = None
    created_at: UTCTime = created()

    @property
    def promoted(self) -> PairScore:
        """The pair kept with its scores: the incumbent unless ``accepted``, else the challenger
        (adapted first) that is (``harness_id``, ``checkpoint_id``)."""
        kept = (self.harness_id, self.checkpoint_id)
        found = [p for p in (self.adapted, self.best) if p is not None and (p.harness_id, p.checkpoint_id) == kept]
        return found[0] if self.accepted and found else self.incumbent
