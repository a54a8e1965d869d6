"""How a meta-loop node records what it decided: ``record`` stores any persisted domain models
(``coevo.records``: the very objects the node returns in the state) in the run's archive under the
run's id, and the ``record_*`` methods name the id each kind is archived under (``<run id>-...``, so
a resumed run rewrites its rows) and add what the record holds beyond the state's object. Nodes call
these and never import storage.

``Recording`` is a mixin of ``coevo.meta.context.MetaContext`` (it reads ``archive`` and ``run_id``).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from coevo.records import (
    Ballot,
    BaseChoice,
    Checkpoint,
    EditRecord,
    GateDecision,
    ModelProposal,
    Phase,
    PoolMember,
    Profile,
    Promotion,
)

if TYPE_CHECKING:
    from coevo.meta.inheritance import ArchiveSummary
    from coevo.meta.state import Candidate, Direction
    from coevo.storage import Archive


class Recording:
    """``record`` and the ``record_*`` methods of ``MetaContext`` (module doc)."""

    archive: Archive
    run_id: str

    def record(self, *records: Any) -> None:
        """Store ``records`` (any ``coevo.records`` models, mixed) in the archive in one transaction,
        each with ``run_id`` set to the run's when the model has one."""
        self.archive.put(*(r.model_copy(update={"run_id": self.run_id}) if "run_id" in type(r).model_fields else r
                           for r in records))

    def record_edit(self, candidate: Candidate, round: int) -> None:
        """Store (or update, by id) the edit record of ``candidate`` (revision by revision) with its
        current status."""
        self.record(EditRecord(
            id=f"{self.run_id}-r{round}-{candidate.id}-v{candidate.revision}", round=round,
            parent_id=candidate.parent_id, child_id=candidate.spec_id, patch=candidate.patch,
            rationale=candidate.rationale, direction=candidate.direction, status=candidate.status,
            reason=candidate.reason))

    def record_gate(self, decisions: Sequence[GateDecision]) -> None:
        """Store each gate decision (b, c, the verdict, its reason and per-task pairs)."""
        self.record(*decisions)

    def record_phase(self, phase: Phase) -> Phase:
        """Store a finished phase under ``<run id>-phase<index>`` (budgets are attributed by it); the
        phase as stored."""
        phase = phase.model_copy(update={"id": f"{self.run_id}-phase{phase.index}", "run_id": self.run_id})
        self.record(phase)
        return phase

    def record_base_checkpoint(self, checkpoint: Checkpoint) -> str:
        """Store W0 (a base model without an adapter) under the run's id unless the archive holds its id
        (``put_new``, atomic: of two runs starting at once on one base, the first to store it keeps it,
        as a later run does); returns the id."""
        self.archive.put_new(checkpoint.model_copy(update={"run_id": self.run_id}))
        return checkpoint.id

    def record_profiles(self, round: int, checkpoint_id: str, profiles: Mapping[str, Profile]) -> None:
        """Store the pool's profiles re-anchored at ``checkpoint_id`` in ``round`` (harness id -> ``Profile``),
        one per (run, checkpoint, harness)."""
        self.record(*(p.model_copy(update={"id": f"{self.run_id}-{checkpoint_id}-{h[:16]}", "round": round})
                      for h, p in profiles.items()))

    def record_pool(self, members: Sequence[PoolMember]) -> list[PoolMember]:
        """Store (or update, by harness id) the sibling pool's new members; the members as stored."""
        stored = [m.model_copy(update={"id": f"{self.run_id}-{m.harness_id[:16]}", "run_id": self.run_id})
                  for m in members]
        self.record(*stored)
        return stored

    def record_votes(self, votes: Sequence[Ballot]) -> None:
        """Store router ballots under the run's id, each id made the run's own (a digest of the run id and
        the router's ``ballot_id``), so two runs routing at one checkpoint keep their ballots apart while
        a routing repeated after a resume replaces the earlier attempt's."""
        self.record(*(v.model_copy(update={"id": hashlib.sha256(f"{self.run_id}\0{v.id}".encode()).hexdigest()[:32]})
                      for v in votes))

    def record_base_choice(self, round: int, choice: BaseChoice, direction: Direction, incumbent: str,
                           candidate: Candidate, summary: ArchiveSummary) -> None:
        """Store an editor's choice of base harness with its evidence: the brief (``direction``) and
        the archive rows it chose from (CoEvo-RSI)."""
        self.record(choice.model_copy(update=dict(
            id=f"{self.run_id}-r{round}-{candidate.id}", round=round, direction=direction.id, incumbent_id=incumbent,
            candidate_id=candidate.id, child_id=candidate.spec_id,
            evidence={"direction": direction.model_dump(mode="json"), "archive": summary.for_prompt()})))

    def record_proposals(self, round: int, proposals: Sequence[ModelProposal]) -> None:
        """Store model-inheritance proposals of ``round`` with their status and val scores (CoEvo-RSI)."""
        self.record(*(p.model_copy(update={"round": round}) for p in proposals))

    def record_promotion(self, promotion: Promotion) -> None:
        """Store a round's promotion decision with the pairs it compared (CoEvo-RSI)."""
        self.record(promotion.model_copy(update={"id": f"{self.run_id}-r{promotion.round}-promotion"}))
