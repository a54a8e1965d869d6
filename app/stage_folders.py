"""The folders weight stages and merges leave behind when they never finish, found and removed on
resume or by ``coevo archive gc``.

A stage writes into ``<out_dir>/adapters/<checkpoint id>/`` (a merge into ``<out_dir>/merges/...``),
marked by ``coevo.models.adapters.stage_folder`` with its run. A stage killed before its checkpoint
is stored leaves that folder (TRL's logs, a ``.partial-<pid>`` adapter) with no checkpoint pointing
at it; a resumed run redoes the stage under a new id, so the folder is dead weight. ``leftovers``
finds them for the runs of an archive — never a folder whose run is still running and alive (its
heartbeat, ``coevo.app.heartbeat``), nor one without coevo's marker — and ``remove`` deletes them:
``coevo archive gc`` lists (``--delete`` removes), and ``run_meta`` removes a run's own when it resumes it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from coevo.app.heartbeat import heartbeats, liveness
from coevo.models.adapters import PARTIAL, read_mark
from coevo.records import Checkpoint, RunRecord
from coevo.storage import Archive

ROOTS = ("adapters", "merges")
"""The folders under a run's ``out_dir`` that hold stage and merge outputs."""


@dataclass(frozen=True)
class Leftover:
    """A folder an unfinished stage left: its ``path``, the ``run_id`` that made it, why it is dead
    (``reason``) and its size in bytes."""

    path: Path
    run_id: str
    reason: str
    size: int


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


def leftovers(archive: Archive, run_id: str | None = None) -> list[Leftover]:
    """The dead stage folders of the runs of ``archive`` (of ``run_id`` only, when given): a marked
    stage folder whose checkpoint was never stored, and inside a stored checkpoint's folder any
    ``.partial-*`` adapter a killed save left. Folders of a run that is ``running`` and not known
    dead are skipped, and so are unmarked ones (not coevo's, or older than the marker)."""
    runs = {r.id: r for r in archive.list(RunRecord) if run_id is None or r.id == run_id}
    beats = heartbeats(archive)
    busy = {r.id for r in runs.values() if r.status == "running" and liveness(beats.get(r.id)).alive is not False}
    stored = {c.id for c in archive.list(Checkpoint)}
    roots = {Path(str(r.config["out_dir"])).expanduser() / root for r in runs.values() if r.config.get("out_dir")
             for root in ROOTS}
    found = []
    for root in sorted(p for p in roots if p.is_dir()):
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            mark = read_mark(folder)
            owner = (mark or {}).get("run_id")
            if owner not in runs or owner in busy:
                continue
            if folder.name not in stored:
                found.append(Leftover(folder, owner, f"stage of checkpoint {folder.name} never finished (no "
                                                     "checkpoint stored)", _size(folder)))
                continue
            found += [Leftover(p, owner, f"half-written adapter of checkpoint {folder.name}", _size(p))
                      for p in sorted(folder.iterdir()) if p.is_dir() and PARTIAL in p.name]
    return found


def remove(found: Iterable[Leftover]) -> int:
    """Delete each leftover folder; returns the bytes freed."""
    freed = 0
    for item in found:
        shutil.rmtree(item.path, ignore_errors=True)
        freed += item.size
    return freed
