"""The archive A<t as CoEvo-RSI browses it (docs/papers.md, §Harness Inheritance; Figure 8):
per (harness, checkpoint) pair its pooled score and TIMR on a split, and the ``ArchiveSummary`` the
editors and the model proposer choose from. Reads the archive through ``Archive`` methods only.
"""

from __future__ import annotations

from typing import Any

from coevo.meta.inheritance import ArchiveEntry, ArchiveSummary, PairStats
from coevo.records import Checkpoint, EvaluationRecord, HarnessRecord


def harness_aliases(archive: Any, run_id: str) -> dict[str, str]:
    """Harness id -> the harness it stands for: a ``sampling`` variant (the train sampler's copy of a
    harness, ``coevo.nodes.loop.sample``) stands for its parent; every other harness for itself."""
    return {h.id: (h.parents[0] if h.origin == "sampling" and h.parents else h.id)
            for h in archive.run_harnesses(run_id)}


def pair_stats(archive: Any, run_id: str, split: str) -> dict[tuple[str, str], PairStats]:
    """(harness id, checkpoint id) -> ``PairStats`` over the run's finished ``split`` evaluations of
    that pair (sampling variants counted as their harness): the rollout-weighted mean reward and the
    TIMR of the pooled turns (violation turns / model turns, CoEvo-RSI Eq. 5; a turn with two
    violations counts once, as ``Trajectory.violation_turns`` does)."""
    alias = harness_aliases(archive, run_id)
    sums: dict[tuple[str, str], list[float]] = {}
    for e in archive.list(EvaluationRecord, run_id=run_id):
        agg = e.aggregates or {}
        if e.split != split or e.status != "done" or not agg.get("n_rollouts"):
            continue
        key = (alias.get(e.harness_id, e.harness_id), e.checkpoint_id)
        n, turns = int(agg["n_rollouts"]), int(agg.get("model_turns", 0))
        acc = sums.setdefault(key, [0.0, 0.0, 0.0, 0.0])
        acc[0] += n * float(agg.get("mean_reward", 0.0))
        acc[1] += turns * float(agg.get("timr", 0.0))
        acc[2] += n
        acc[3] += turns
    return {(h, c): PairStats(harness_id=h, checkpoint_id=c, split=split, score=r / n if n else 0.0,
                              timr=v / t if t else 0.0, rollouts=int(n), turns=int(t))
            for (h, c), (r, v, n, t) in sums.items()}


def summarize(archive: Any, run_id: str, incumbent: str, checkpoint: str, start_checkpoint: str,
              latest_only: bool = False) -> ArchiveSummary:
    """The ``ArchiveSummary`` of run ``run_id`` in its current round: every harness of the run (not
    sampling variants), oldest first, with its train outcomes per checkpoint, and every checkpoint
    (W0 = ``start_checkpoint`` first, then the run's, oldest first). ``latest_only`` keeps only the
    incumbent pair (the Latest-only ablation)."""
    stats = pair_stats(archive, run_id, "train")
    harnesses = [h for h in archive.run_harnesses(run_id) if h.origin != "sampling"]
    if incumbent not in {h.id for h in harnesses}:
        record = archive.get(HarnessRecord, incumbent)
        harnesses += [record] if record is not None else []
    records = {c.id: c for c in archive.list(Checkpoint, run_id=run_id)}
    start = archive.get(Checkpoint, start_checkpoint)
    records = {start_checkpoint: start, **records} if start is not None else records
    ids = list(dict.fromkeys([start_checkpoint, *records, checkpoint]))
    if latest_only:
        harnesses, ids = [h for h in harnesses if h.id == incumbent], [checkpoint]
    entries = [ArchiveEntry(index=i, harness_id=h.id, parents=list(h.parents), origin=h.origin,
                            train={c: s for (hid, c), s in stats.items() if hid == h.id and c in ids})
               for i, h in enumerate(harnesses)]
    adapters = [c for c in ids if c in records and records[c] is not None and records[c].adapter_path]
    return ArchiveSummary(incumbent=incumbent, checkpoint=checkpoint, entries=entries, checkpoints=ids,
                          adapters=adapters, latest_only=latest_only)
