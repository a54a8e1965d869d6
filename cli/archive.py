"""``coevo archive list|show|export``: read the archive back."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from coevo.app.heartbeat import heartbeats, liveness
from coevo.cli.common import DB_HELP, DEFAULT_DB, console, open_archive, shown, user_errors
from coevo.graphs.registry import STRATEGIES
from coevo.masking import redact, redact_data
from coevo.records import (
    Checkpoint,
    EditRecord,
    EvaluationRecord,
    ExportRecord,
    GateDecision,
    HarnessRecord,
    RunRecord,
    Trajectory,
)
from coevo.report.numbers import stored_score as score
from coevo.storage import AmbiguousIdError, Archive, ArchiveError

app = typer.Typer(help="Read the archive: list runs, harnesses and evaluations; show one; export a harness."
                       "\n\nExample: `coevo archive list`", no_args_is_help=True, rich_markup_mode="markdown")


class Kind(str, Enum):
    """What `coevo archive list` lists: every kind (``all``), or one table of the archive."""

    all = "all"
    runs = "runs"
    harnesses = "harnesses"
    evaluations = "evaluations"
    checkpoints = "checkpoints"
    exports = "exports"


SHOWN: dict[str, type] = {"evaluations": EvaluationRecord, "harnesses": HarnessRecord, "runs": RunRecord,
                          "checkpoints": Checkpoint, "trajectories": Trajectory, "edits": EditRecord,
                          "gate_decisions": GateDecision, "exports": ExportRecord}
"""The kinds ``coevo archive show`` searches for an id prefix, in this order (``resolve_id``'s table names)."""


def _when(ts: dt.datetime) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")


def _table(title: str, *columns: str) -> Table:
    """A table whose id-like columns never wrap; the others shrink instead (on a terminal; in a pipe
    every column is whole, ``coevo.cli.common.PipeConsole``)."""
    table = Table(title=title)
    for name in columns:
        wide = name in ("id", "harness")
        table.add_column(name, no_wrap=wide, min_width=12 if wide else None)
    return table


def _status(run: Any, beat: Any) -> str:
    """A run's status; for a ``running`` one, what its heartbeat says (``coevo.app.heartbeat.liveness``):
    ``running (DEAD: ...)`` for a run whose process is gone, so it can be resumed."""
    if run.status != "running":
        return run.status
    return f"running ({liveness(beat).text})"


def _tables(archive: Archive, kind: Kind, limit: int) -> list[Table]:
    tables = []
    if kind in (Kind.all, Kind.runs):
        t = _table("runs", "id", "strategy", "status", "created (UTC)")
        beats = heartbeats(archive)
        for r in archive.list(RunRecord)[-limit:]:
            t.add_row(r.id, r.strategy, _status(r, beats.get(r.id)), _when(r.created_at))
        tables.append(t)
    if kind in (Kind.all, Kind.harnesses):
        t = _table("harnesses", "id", "name", "origin", "parents", "created (UTC)")
        for h in archive.list(HarnessRecord)[-limit:]:
            t.add_row(h.id[:12], str(h.spec.get("name", "")), h.origin, ", ".join(p[:12] for p in h.parents),
                      _when(h.created_at))
        tables.append(t)
    if kind in (Kind.all, Kind.evaluations):
        t = _table("evaluations", "id", "harness", "checkpoint", "env/split", "k", "tasks", "pass@k", "mean credit",
                   "trivial", "status")
        for e in archive.list(EvaluationRecord)[-limit:]:
            a = e.aggregates
            t.add_row(e.id[:12], e.harness_id[:12], e.checkpoint_id, f"{e.env}/{e.split}", str(e.k),
                      str(len(e.task_ids)), score(a.get("pass_at_k")), score(a.get("mean_reward")),
                      score(a.get("trivial_baseline")), e.status)
        tables.append(t)
    if kind == Kind.checkpoints:
        t = _table("checkpoints", "id", "base model", "adapter", "parents", "created (UTC)")
        for c in archive.list(Checkpoint)[-limit:]:
            t.add_row(c.id, escape(c.base_model), escape(c.adapter_path or "-"), ", ".join(c.parents),
                      _when(c.created_at))
        tables.append(t)
    if kind == Kind.exports:
        t = _table("exports (coevo export)", "id", "run", "harness", "checkpoint", "kind", "version", "folder",
                   "created (UTC)")
        for x in archive.list(ExportRecord)[-limit:]:
            t.add_row(x.id[:12], x.run_id or "-", x.harness_id[:12], x.checkpoint_id, x.kind,
                      "-" if x.version is None else f"v{x.version}", escape(x.path), _when(x.created_at))
        tables.append(t)
    return tables


@app.command("list")
def list_cmd(kind: Kind = typer.Argument(Kind.all, help="What to list."),
             limit: int = typer.Option(50, "--limit", min=1, help="Show the newest N rows of each table."),
             db: str = typer.Option(DEFAULT_DB, "--db", envvar="COEVO_DB", help=DB_HELP)) -> None:
    """List runs, harnesses and evaluations (or one kind, or checkpoints, or the agent folders
    `coevo export` wrote), oldest first.

    Example:

    `coevo archive list exports`"""
    with user_errors():
        archive = open_archive(db)
        for table in _tables(archive, kind, limit):
            console.print(table)


def _find(archive: Archive, id: str) -> tuple[str, Any]:
    """The (kind, pydantic object) whose id is ``id`` or starts with it, in any table; else the edit
    of the candidate ``id`` (the ``check`` lines of a run print candidate ids). Raises
    ``AmbiguousIdError`` naming the matches when ``id`` starts several ids (of one kind or several)
    and is none of them exactly, unless one of them starts all the others (a run's id, which its
    edits' and gate decisions' ids extend)."""
    found, several, clashing = [], [], []
    for kind in SHOWN:
        try:
            found.append((kind, archive.resolve_id(kind, id)))
        except AmbiguousIdError as err:
            several.append(str(err))
            clashing += err.ids
        except ArchiveError:
            continue
    found = [match for match in found if match[1] == id][:1] or found  # an exact id is never ambiguous
    # ids derived from another (a run's edits and gate decisions: <run id>-r0-...) leave the prefix to it,
    # even when several of them share the prefix (a run's sampled candidates -s1, -s2 ...)
    others = [other for _, other in found] + clashing
    leader = [m for m in found if all(other.startswith(m[1]) for other in others)][:1]
    found = leader or found
    if several and not leader:
        raise AmbiguousIdError(several[0])
    if len(found) > 1:
        raise AmbiguousIdError(f"{id!r} is ambiguous: " + ", ".join(f"{SINGULAR[k]} {f}" for k, f in found)
                               + " start with it; give more characters of the one you mean")
    if found:
        kind, full = found[0]
        return kind, archive.get(SHOWN[kind], full)
    # edit ids: <run>-r<round>-<candidate>-v<revision> (candidate X is not candidate X-s1, its next sample)
    candidate = re.compile(rf"-r\d+-{re.escape(id)}-v\d+$")
    edits = [e for e in archive.list(EditRecord) if candidate.search(e.id)]
    if len(edits) == 1:
        return "edits", edits[0]
    if edits:
        raise ArchiveError(f"candidate {id!r} has {len(edits)} edits (rounds, revisions or runs): show one of "
                           + ", ".join(e.id for e in edits[-5:]))
    raise ArchiveError(f"no row id starts with {id!r} in {redact(archive.url)}: see `coevo archive list`")


def _graph_state(db: str, run: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Where the run's checkpointed graph stands: the nodes still to run, a failed node's error,
    the pending gate questions (ids to answer with ``coevo run --resume RUN --answer ID=yes|no``);
    and the saved state's values."""
    from coevo.app.run import run_snapshot

    if run.strategy not in STRATEGIES:
        return {}, {}
    snap = asyncio.run(run_snapshot(db, run.id, run.strategy))
    errors = [t.name + ": " + str(t.error).strip('"') for t in snap.tasks if t.error]
    questions = [{"id": i.id, **{k: i.value.get(k) for k in ("round", "candidate", "b", "c", "reason")}}
                 for i in snap.interrupts]
    return {"next": list(snap.next), **({"error": errors} if errors else {}),
            **({"pending_questions": questions} if questions else {})}, dict(snap.values)


def final_pair_text(archive: Archive, run: Any, values: dict[str, Any]) -> dict[str, Any] | str:
    """A finished run's final pair as ``coevo archive show`` prints it (harness, checkpoint, its adapter
    path; a routed Harness-S run says so); for a run that has none, why."""
    from coevo.app.export import final_pair_ids, routed

    pair = final_pair_ids(values) if run.status == "done" else None
    if pair is None:
        return f"none yet (status {run.status}): a run has one when it finishes"
    checkpoint = archive.get(Checkpoint, pair[1])
    return {"harness": pair[0], "checkpoint": pair[1],
            "adapter_path": checkpoint.adapter_path if checkpoint is not None else None,
            **({"routing": "H0 with the run's Harness-S pool and Rank-1 router"} if routed(values) else {})}


def _brief(data: Any) -> Any:
    """``data`` with every long list of numbers (token ids, logprobs) replaced by its length."""
    if isinstance(data, dict):
        return {key: _brief(value) for key, value in data.items()}
    if isinstance(data, list):
        if len(data) > 8 and all(isinstance(x, (int, float)) for x in data):
            return f"<{len(data)} numbers>"
        return [_brief(x) for x in data]
    return data


SINGULAR = {"evaluations": "evaluation", "harnesses": "harness", "runs": "run", "checkpoints": "checkpoint",
            "trajectories": "trajectory", "edits": "edit", "gate_decisions": "gate decision", "exports": "export"}


@app.command()
def show(id: str = typer.Argument(..., help="An id or unique id prefix of any archived row."),
         full: bool = typer.Option(False, "--full", help="Print token ids and logprobs in full."),
         db: str = typer.Option(DEFAULT_DB, "--db", envvar="COEVO_DB", help=DB_HELP)) -> None:
    """Print one archived object as JSON: an evaluation, harness, run, checkpoint, trajectory,
    edit, gate decision or export; a finished run also names its final pair and the command that
    exports it.

    Example:

    `coevo archive show RUN_ID`"""
    with user_errors():
        archive = open_archive(db)
        kind, obj = _find(archive, id)
    data = redact_data(obj.model_dump(mode="json"))  # an archive written before masking may hold secrets
    command = ""
    if kind == "runs":
        data["graph"], values = _graph_state(db, obj)
        if obj.strategy in STRATEGIES:
            from coevo.app.export import export_command

            data["final_pair"] = final_pair_text(archive, obj, values)
            command = export_command(obj.id, shown(db)) if isinstance(data["final_pair"], dict) else ""
        beat = heartbeats(archive).get(obj.id)
        if beat is not None or obj.status == "running":
            data["heartbeat"] = {**(beat.model_dump(mode="json", exclude={"id"}) if beat else {}),
                                 "verdict": _status(obj, beat)}
    if kind == "evaluations" and not full:
        data.get("aggregates", {}).pop("per_task", None)
    if not full:
        data = _brief(data)
    console.print(f"[bold]{SINGULAR[kind]}[/bold] {obj.id}")
    console.print(Syntax(json.dumps(data, indent=2), "json"))
    if command:
        console.print(f"export the final pair as an agent folder: {command}", highlight=False, soft_wrap=True)


@app.command()
def migrate(db: str = typer.Option(DEFAULT_DB, "--db", envvar="COEVO_DB", help=DB_HELP)) -> None:
    """Bring an archive written by an older coevo up to this coevo's schema.

    Alembic migrations; opening an archive does the same, this says what changed.

    Example:

    `coevo archive migrate --db coevo_runs/coevo.db`"""
    from coevo.storage.migrate import head

    with user_errors():
        before = open_archive(db, migrate=False)
        found, version = before.revision, before.schema_version
        before.close()
        open_archive(db).close()
    was = f"migration {found}" if found else f"schema version {version} (before Alembic)"
    if found == head():
        console.print(f"archive {shown(db)} is up to date (migration {found})")
    else:
        console.print(f"archive {shown(db)}: {was} -> migration {head()}")


@app.command()
def export(harness_id: str = typer.Argument(..., help="Harness id or unique prefix."),
           out: Path = typer.Option(..., "-o", "--out", help="Output JSON file."),
           db: str = typer.Option(DEFAULT_DB, "--db", envvar="COEVO_DB", help=DB_HELP)) -> None:
    """Write a harness spec alone to a JSON file, to embed with `coevo.load_harness`; `coevo export
    RUN -o DIR` writes a whole agent (spec, adapter, base model, card) for `coevo.load_agent`.

    Example:

    `coevo archive export HARNESS_ID -o spec.json`"""
    with user_errors():
        archive = open_archive(db)
        record = archive.get(HarnessRecord, archive.resolve_id("harnesses", harness_id))
    assert record is not None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record.spec, indent=2) + "\n")
    console.print(f"wrote harness {record.id[:12]} to {out}")


@app.command("export-router")
def export_router(run_id: str = typer.Argument(..., help="A harness_s / harness_s_he_only run id or unique prefix."),
                  out: Path = typer.Option(Path("router.json"), "-o", "--out", help="Output JSON file."),
                  db: str = typer.Option(DEFAULT_DB, "--db", envvar="COEVO_DB", help=DB_HELP)) -> None:
    """Write a Harness-S run's sibling pool, profiles and router settings to a JSON file.

    Load it with `coevo.load_router` and embed `coevo.build_routed_graph` (Rank-1 routing).

    Example:

    `coevo archive export-router RUN_ID -o router.json`"""
    from coevo.app.bundle import write_router

    with user_errors():
        archive = open_archive(db)
        full = archive.resolve_id("runs", run_id)
        path = write_router(archive, full, out)
    console.print(f"wrote the router of run {full} to {path}")


@app.command()
def gc(run_id: str = typer.Option(None, "--run", help="Only this run's folders (an id or unique prefix)."),
       delete: bool = typer.Option(False, "--delete", help="Remove the folders listed (default: only list them)."),
       db: str = typer.Option(DEFAULT_DB, "--db", envvar="COEVO_DB", help=DB_HELP)) -> None:
    """List (or remove) the folders of weight stages and merges that never finished.

    Those killed before their checkpoint was stored, or with a half-written adapter, under the
    out_dir of each run in the archive; --delete removes them. A run that is alive is left alone.

    Example:

    `coevo archive gc --delete`"""
    from coevo.app.stage_folders import leftovers, remove

    with user_errors():
        archive = open_archive(db)
        found = leftovers(archive, archive.resolve_id("runs", run_id) if run_id else None)
    if not found:
        console.print("no folders of unfinished stages")
        return
    table = _table(f"folders of unfinished stages ({'removed' if delete else 'kept: --delete removes them'})",
                   "run", "folder", "why", "MB")
    for item in found:
        table.add_row(item.run_id, escape(str(item.path)), item.reason, f"{item.size / 1e6:.1f}")
    freed = remove(found) if delete else sum(item.size for item in found)
    console.print(table)
    console.print(f"{len(found)} folder(s), {freed / 1e6:.1f} MB {'freed' if delete else 'to free with --delete'}")
