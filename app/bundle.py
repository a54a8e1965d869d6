"""A Harness-S run's router as a file (``coevo archive export-router RUN_ID``) and back
(``load_router``), so an app embeds Rank-1 routing like a single harness::

    pool, router = load_router("router.json")
    graph = build_routed_graph(pool, router, model, episode)    # coevo.graphs.harness_s.routed

The file holds the pool's specs, H0's id, each sibling's latest profile (val evidence only), the
val tasks those profiles name (prompts and metadata: the Rule Router's "similar tasks"), and the
router settings. Voters default to the offline Rule Router; pass LLM voters to ``load_router``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from coevo.envs.base import Task
from coevo.errors import InputError
from coevo.graphs.harness_s.router import Router
from coevo.harnesses.spec import HarnessSpec, load_harness
from coevo.meta.pool import Profile
from coevo.records import HarnessRecord, PoolMember, RunRecord
from coevo.roles.voter import RuleVoter, Voter

FORMAT = "coevo-router/1"
ARCHIVED = {"id", "run_id", "round", "created_at"}
"""A ``Profile``'s archive bookkeeping, left out of the router file (it keeps the profile's own fields)."""


def router_bundle(archive: Any, run_id: str) -> dict[str, Any]:
    """The router file's content for run ``run_id`` from ``archive``: pool members (H0 = the member
    of round -1), the latest profile of each (the last re-anchoring), the val tasks they name.
    Raises ``ValueError`` naming the fix when the run has no pool or no profiles."""
    members = archive.list(PoolMember, run_id=run_id)
    if not members:
        raise InputError(f"run {run_id!r} has no sibling pool: only a harness_s or harness_s_he_only run has one "
                         "(see `coevo archive list runs`)")
    h0 = next((m.harness_id for m in members if m.round < 0), members[0].harness_id)
    profiles: dict[str, dict] = {}
    for p in archive.list(Profile, run_id=run_id):  # oldest first: the last re-anchoring wins
        profiles[p.harness_id] = p.model_dump(mode="json", exclude=ARCHIVED)
    if not profiles:
        raise InputError(f"run {run_id!r} has no profiles yet: let it reach its profile step, then export again")
    ids = [m.harness_id for m in members if m.harness_id in profiles]
    specs = {h: archive.get(HarnessRecord, h).spec for h in ids}
    val_ids = sorted({t for h in ids for t in profiles[h].get("per_task", {})})
    tasks = [t for t in (archive.get(Task, i) for i in val_ids) if t is not None]
    run = archive.get(RunRecord, run_id)
    settings = (run.config or {}).get("harness_s", {}) if run is not None else {}
    return {"format": FORMAT, "run_id": run_id, "h0": h0, "pool": specs, "profiles": {h: profiles[h] for h in ids},
            "val_tasks": [t.model_dump(mode="json") for t in tasks], "ballot": settings.get("ballot", 4),
            "seed": (run.config or {}).get("seed", 0) if run is not None else 0}


def write_router(archive: Any, run_id: str, out: str | Path) -> Path:
    """Write ``router_bundle(archive, run_id)`` as JSON to ``out``; returns the path."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(router_bundle(archive, run_id), indent=1) + "\n")
    return path


def load_router(source: str | Path | dict[str, Any],
                voters: Sequence[Voter] | None = None) -> tuple[dict[str, HarnessSpec], Router]:
    """The pool's specs by id and a ``Router`` from a router file (or its parsed content).
    ``voters`` default to one ``RuleVoter``. Raises ``ValueError`` for a file of another format."""
    data = source if isinstance(source, dict) else json.loads(Path(source).read_text())
    if data.get("format") != FORMAT:
        raise InputError(f"{source if not isinstance(source, dict) else 'the data'} is not a router file "
                         f"(format {data.get('format')!r}, expected {FORMAT!r}); write one with "
                         "`coevo archive export-router RUN_ID -o router.json`")
    pool = {h: load_harness(spec) for h, spec in data["pool"].items()}
    profiles = {h: Profile.model_validate(p) for h, p in data["profiles"].items()}
    val = {t["id"]: Task.model_validate(t) for t in data["val_tasks"]}
    return pool, Router(voters or [RuleVoter()], profiles, val, data["h0"], ballot=data["ballot"], seed=data["seed"])
