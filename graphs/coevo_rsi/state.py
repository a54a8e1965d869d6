"""CoEvo-RSI's state: the core ``MetaState`` plus the round's archive view A<t, the model proposals,
the adapted pair and the promotion decision, and the ``Send`` payload of its editors."""

from __future__ import annotations

from coevo.meta.inheritance import ArchiveSummary, ModelProposal, PairScore, Promotion
from coevo.meta.state import EditRequest, MetaState


class CoevoRsiState(MetaState, total=False):
    """``MetaState`` plus CoEvo-RSI's per-round keys."""

    archive_view: ArchiveSummary
    """Replaced each round by ``survey``: the archive A<t the editors and the model proposer browse."""
    proposals: list[ModelProposal]
    """Replaced each round by ``inherit``: the model proposals with their val scores."""
    adapted: PairScore | None
    """Replaced each round by ``adapt``: the adapted proposal p⁺ (None when not adapted)."""
    promotion: Promotion
    """Replaced each round by ``promote``: the round's promotion decision."""
    sampler_position: int
    """Replaced by ``adapt``: tasks drawn so far from the run's persistent train sampler (WHALE §3.1's),
    where the next round's adaptation continues."""


class BaseRequest(EditRequest):
    """What ``fan_out_with_archive`` sends each ``edit_from_base`` branch: an ``EditRequest`` plus the
    archive summary A<t the branch's editor picks its base from."""

    summary: ArchiveSummary
