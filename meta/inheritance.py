"""What CoEvo-RSI's inheritance steps pass along (docs/papers.md, §Harness Inheritance, §Model
Inheritance and Selection): the archive A<t as the meta roles see it, each editor's chosen base,
each model proposal and the round's promotion. Pure pydantic (the meta state and the archive tables
mirror them); ``coevo.graphs.coevo_rsi.archive_view`` builds ``ArchiveSummary`` from the archive.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from coevo.records.inheritance import BaseChoice, ModelProposal, PairScore, Promotion

__all__ = ["ArchiveEntry", "ArchiveSummary", "BaseChoice", "ModelProposal", "PairScore", "PairStats", "Promotion"]


class PairStats(BaseModel):
    """One (harness, checkpoint) pair on one split, pooled over every finished archived evaluation
    of that pair: ``score`` the rollout-weighted mean reward in [0, 1], ``timr`` the fraction of
    model turns with >= 1 interface violation (CoEvo-RSI Eq. 5: violation turns / model turns,
    pooled over rollouts), ``rollouts`` and ``turns`` the counts behind them."""

    harness_id: str
    checkpoint_id: str
    split: str
    score: float
    timr: float
    rollouts: int
    turns: int


class ArchiveEntry(BaseModel):
    """One archived harness H_i of A<t: its ``index`` (what an editor names), id, parents, origin
    (``base``, ``edit``, ...) and its train-split outcomes under each checkpoint it ran with
    (``train[checkpoint id]``; train only: val and test stay sealed from the meta roles). ``probe``:
    its outcome under the current checkpoint on the round's probe tasks (the same few train tasks
    and seeds for every harness, so probes compare; None when not probed). ``failures``: its
    per-cause evidence, failed train rollouts per root cause (``coevo.roles.diagnosis``) among its
    ``rollouts`` train rollouts of the run (any checkpoint)."""

    index: int
    harness_id: str
    parents: list[str] = Field(default_factory=list)
    origin: str = ""
    train: dict[str, PairStats] = Field(default_factory=dict)
    probe: PairStats | None = None
    failures: dict[str, int] = Field(default_factory=dict)
    rollouts: int = 0


class ArchiveSummary(BaseModel):
    """A<t as the editors and the model proposer browse it: the archived harnesses (``entries``,
    oldest first, index = position), the archived checkpoints (``checkpoints``, oldest first; those
    with a LoRA adapter in ``adapters``), the incumbent pair (``incumbent``, ``checkpoint``) and
    whether inheritance is restricted to it (``latest_only``: CoEvo-RSI's Latest-only ablation)."""

    incumbent: str
    checkpoint: str
    entries: list[ArchiveEntry] = Field(default_factory=list)
    checkpoints: list[str] = Field(default_factory=list)
    adapters: list[str] = Field(default_factory=list)
    latest_only: bool = False

    def entry(self, harness_id: str) -> ArchiveEntry | None:
        """The entry of ``harness_id``, or None when it is not in the summary."""
        return next((e for e in self.entries if e.harness_id == harness_id), None)

    def outcome(self, entry: ArchiveEntry) -> PairStats | None:
        """``entry``'s outcome under the current checkpoint: its probe when every entry was probed
        (one task set for all), else its pooled train outcome under the current checkpoint."""
        probed = all(e.probe is not None for e in self.entries)
        return entry.probe if probed else entry.train.get(self.checkpoint)

    def best_base(self) -> ArchiveEntry:
        """The entry with the best ``outcome`` under the current checkpoint: highest score, then
        lowest TIMR, then the newest; entries never run under it rank last, the incumbent first
        among them. Raises ``ValueError`` on an empty summary."""
        return self.ranked()[0]

    def ranked(self) -> list[ArchiveEntry]:
        """The entries best first, in ``best_base``'s order. Raises ``ValueError`` on an empty summary."""
        if not self.entries:
            raise ValueError("the archive summary holds no harness; run setup first")

        def key(e: ArchiveEntry) -> tuple[Any, ...]:
            s = self.outcome(e)
            return (s is not None, s.score if s else 0.0, -s.timr if s else float(e.harness_id == self.incumbent),
                    e.index)

        return sorted(self.entries, key=key, reverse=True)

    def ranked_checkpoints(self, harness_ids: list[str]) -> list[str]:
        """The archived checkpoints ordered by their train outcome under the first of ``harness_ids``
        that has any (an offspring, then its base): highest score, then lowest TIMR, then newest;
        checkpoints with no outcome follow, the current checkpoint first, then newest first."""
        stats: dict[str, PairStats] = {}
        for h in harness_ids:
            e = self.entry(h)
            if e is not None and e.train:
                stats = {c: s for c, s in e.train.items() if c in self.checkpoints}
                break
        order = {c: i for i, c in enumerate(self.checkpoints)}
        scored = sorted(stats, key=lambda c: (-stats[c].score, stats[c].timr, -order[c]))
        rest = sorted((c for c in self.checkpoints if c not in stats),
                      key=lambda c: (c != self.checkpoint, -order[c]))
        return scored + rest

    def for_prompt(self) -> list[dict[str, Any]]:
        """The summary as an LLM sees it: per index, the harness id (12 chars), parents, origin, its
        train score/TIMR per checkpoint and its per-cause evidence (failed train rollouts by cause)."""
        return [{"index": e.index, "harness": e.harness_id[:12], "parents": [p[:12] for p in e.parents],
                 "origin": e.origin, "incumbent": e.harness_id == self.incumbent,
                 "train": {c: _brief(s) for c, s in e.train.items()},
                 **({"train_failures_by_cause": e.failures, "train_rollouts": e.rollouts} if e.rollouts else {}),
                 **({"probe_under_current_checkpoint": _brief(e.probe)} if e.probe else {})} for e in self.entries]


def _brief(s: PairStats) -> dict[str, Any]:
    return {"score": round(s.score, 4), "timr": round(s.timr, 4), "rollouts": s.rollouts}
