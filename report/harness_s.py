"""The Harness-S sections of the run report: the sibling pool with lineage (Eq. 4), the latest
behaviour profiles (Eq. 8, 11), the rescue numbers of each weight stage (Alg. 1: trigger rate,
rescue success, effective-group rate) and the router's ballots; "" for a run without a pool."""

from __future__ import annotations

from typing import Any

from coevo.records import Ballot, Checkpoint, PoolMember, Profile
from coevo.report.markup import html_table
from coevo.report.numbers import percent, plain


def pool_section(archive: Any, run_id: str) -> str:
    """The pool table: each sibling's id, parent, evolution round, the causes it targets, val score
    under the frozen policy, tasks solved (V(H)) and whether Eq. 3 chose it as a parent."""
    members = archive.list(PoolMember, run_id=run_id)
    if not members:
        return ""
    rows = [[m.harness_id[:12], (m.parent or "–")[:12], "H0" if m.round < 0 else m.round,
             " + ".join(m.causes)[:120] or "–", plain(m.val_score), len(m.solved), "yes" if m.selected else ""]
            for m in members]
    return ("<h2>Sibling pool (Harness-S Eq. 4)</h2><p>Every executable, protocol-compliant child of directional "
            "evolution, with its parent; parents of the next round maximise joint val coverage (Eq. 3).</p>"
            + html_table(["harness", "parent", "round", "causes targeted", "val (frozen W0)", "val tasks solved",
                      "parent next round"], rows))


def profile_section(archive: Any, run_id: str) -> str:
    """The latest profile of each sibling: checkpoint, val success, prefer and avoid entries."""
    latest: dict[str, Any] = {}
    for p in archive.list(Profile, run_id=run_id):
        latest[p.harness_id] = p
    if not latest:
        return ""
    rows = []
    for h, prof in latest.items():

        def entries(found: list[Any]) -> str:
            return "; ".join(f"when {e.when}: {e.behavior}" for e in found)[:300] or "–"

        rows.append([h[:12], prof.checkpoint_id[:24], plain(prof.val_success), entries(prof.prefer),
                     entries(prof.avoid), prof.reason[:80]])
    return ("<h2>Behaviour profiles (Eq. 8, 11)</h2><p>From paired val runs against H0 at the last re-anchoring "
            "(test outcomes never enter).</p>"
            + html_table(["harness", "checkpoint", "val success", "prefer", "avoid", "ignored reply"], rows))


def rescue_section(archive: Any, run_id: str) -> str:
    """Per weight stage and step: rescue trigger rate, rescue success and effective-group rate."""
    rows = []
    for c in sorted(archive.list(Checkpoint, run_id=run_id), key=lambda c: c.created_at):
        m = c.metrics or {}
        if "rescue_rate" not in m:
            continue
        rows.append([c.id[:30], "all", percent(m.get("rescue_rate")), percent(m.get("rescue_success")),
                     percent(m.get("effective_group_rate"))])
        rows += [["", s.get("step"), percent(s.get("rescue_rate")),
                  percent(s.get("rescue_success")) if s.get("rescued_groups") else "–",
                  percent(s.get("effective_group_rate"))] for s in m.get("history", [])]
    if not rows:
        return ""
    return ("<h2>Complementary rescue (Alg. 1, Eq. 5)</h2><p>Trigger rate: groups whose K rollouts under H0 all "
            "failed and were replaced by the router's top-K siblings; success: rescued groups with at least one "
            "success; effective groups: retained groups with both a success and a failure.</p>"
            + html_table(["checkpoint", "step", "rescue triggered", "rescue success", "effective groups"], rows))


def votes_section(archive: Any, run_id: str) -> str:
    """How many ballots the router's voters cast, per purpose, and how many were ignored."""
    votes = archive.list(Ballot, run_id=run_id)
    if not votes:
        return ""
    purposes = sorted({v.purpose for v in votes})
    rows = [[p, sum(v.purpose == p for v in votes), sum(v.purpose == p and not v.ranking for v in votes)]
            for p in purposes]
    return "<h2>Router ballots (Eq. 9)</h2>" + html_table(["purpose", "ballots", "ignored (malformed)"], rows)


def harness_s_sections(archive: Any, run_id: str) -> str:
    """Every Harness-S section of run ``run_id`` ("" when it has none)."""
    return "".join(f(archive, run_id) for f in (pool_section, profile_section, rescue_section, votes_section))
