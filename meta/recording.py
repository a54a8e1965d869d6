"""How a meta-loop node records what it decided: one ``MetaContext`` method per domain object, each
storing it in the run's archive under the run's id. Nodes call these and never import storage:
the conversion of a domain model to its archive record lives here, once.

``Recording`` is a mixin of ``coevo.meta.context.MetaContext`` (it reads ``archive`` and ``run_id``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from coevo.storage.tables import (
    BaseChoiceRecord,
    CheckpointRecord,
    EditRecord,
    GateDecisionRecord,
    ModelProposalRecord,
    PhaseRecord,
    PoolMemberRecord,
    ProfileRecord,
    PromotionRecord,
    VoteRecord,
)

if TYPE_CHECKING:
    from coevo.meta.inheritance import ArchiveSummary, BaseChoice, ModelProposal, Promotion
    from coevo.meta.pool import PoolMember, Profile
    from coevo.meta.search import Phase
    from coevo.meta.state import Candidate, Direction, GateDecision
    from coevo.storage import Archive


class Recording:
    """The ``record_*`` methods of ``MetaContext`` (module doc)."""

    archive: Archive
    run_id: str

    def record_edit(self, candidate: Candidate, round: int) -> None:
        """Store (or update, by id) the edit record of ``candidate`` with its current status."""
        self.archive.add_edits([EditRecord(
            id=f"{self.run_id}-r{round}-{candidate.id}-v{candidate.revision}", run_id=self.run_id, round=round,
            parent_id=candidate.parent_id, child_id=candidate.spec_id, patch=candidate.patch,
            rationale=candidate.rationale, direction=candidate.direction, status=candidate.status,
            reason=candidate.reason)])

    def record_gate(self, decisions: Sequence[GateDecision]) -> None:
        """Store each gate decision (b, c, the verdict, its reason and per-task pairs)."""
        for d in decisions:
            self.archive.add_gate_decision(GateDecisionRecord(**d.model_dump()))

    def record_phase(self, phase: Phase) -> None:
        """Store a finished phase under ``<run id>-phase<index>`` (budgets are attributed by it)."""
        self.archive.add_phases([PhaseRecord(id=f"{self.run_id}-phase{phase.index}", run_id=self.run_id,
                                             **phase.model_dump())])

    def record_base_checkpoint(self, checkpoint_id: str, base_model: str, config: Mapping[str, Any]) -> str:
        """Store W0 (a base model without an adapter) unless the archive holds ``checkpoint_id``;
        returns ``checkpoint_id``."""
        if self.archive.get_checkpoint(checkpoint_id) is None:
            self.archive.add_checkpoint(CheckpointRecord(id=checkpoint_id, base_model=base_model, config=dict(config)))
        return checkpoint_id

    def record_profiles(self, round: int, checkpoint_id: str, profiles: Mapping[str, Profile]) -> None:
        """Store the pool's profiles re-anchored at ``checkpoint_id`` (harness id -> ``Profile``)."""
        self.archive.add_profiles([ProfileRecord(
            id=f"{self.run_id}-{checkpoint_id}-{h[:16]}", run_id=self.run_id, round=round, harness_id=h,
            checkpoint_id=checkpoint_id, profile=p.model_dump(mode="json")) for h, p in profiles.items()])

    def record_pool(self, members: Sequence[PoolMember]) -> None:
        """Store (or update, by harness id) the sibling pool's new members."""
        self.archive.add_pool_members([PoolMemberRecord(id=f"{self.run_id}-{m.harness_id[:16]}", run_id=self.run_id,
                                                        **m.model_dump()) for m in members])

    def record_votes(self, votes: Sequence[VoteRecord]) -> None:
        """Store router ballots under the run's id."""
        self.archive.add_votes([v.model_copy(update={"run_id": self.run_id}) for v in votes])

    def record_base_choice(self, round: int, choice: BaseChoice, direction: Direction, incumbent: str,
                           candidate: Candidate, summary: ArchiveSummary) -> None:
        """Store an editor's choice of base harness with its evidence: the brief (``direction``) and
        the archive rows it chose from (CoEvo-RSI)."""
        self.archive.add_inheritance([BaseChoiceRecord(
            id=f"{self.run_id}-r{round}-{candidate.id}", run_id=self.run_id, round=round, direction=direction.id,
            index=choice.index, base_id=choice.base_id, incumbent_id=incumbent, candidate_id=candidate.id,
            child_id=candidate.spec_id, reason=choice.reason,
            evidence={"direction": direction.model_dump(mode="json"), "archive": summary.for_prompt()})])

    def record_proposals(self, round: int, proposals: Sequence[ModelProposal]) -> None:
        """Store model-inheritance proposals with their status and val scores (CoEvo-RSI)."""
        self.archive.add_inheritance([ModelProposalRecord(run_id=self.run_id, round=round, **p.model_dump())
                                      for p in proposals])

    def record_promotion(self, promotion: Promotion) -> None:
        """Store a round's promotion decision with the pairs it compared (CoEvo-RSI)."""
        kept = promotion.promoted
        self.archive.add_inheritance([PromotionRecord(
            id=f"{self.run_id}-r{promotion.round}-promotion", run_id=self.run_id, round=promotion.round,
            harness_id=kept.harness_id, checkpoint_id=kept.checkpoint_id, accepted=promotion.accepted,
            margin=promotion.margin, reason=promotion.reason,
            pairs=promotion.model_dump(mode="json", include={"incumbent", "best", "adapted"}))])
