"""``coevo export RUN -o DIR``: a run's final pair (or any pair of the archive) as a self-contained agent
folder (the layout: ``coevo.app.release``), recorded in the archive (``coevo.records.ExportRecord``).

The final pair is the one the run's final test measured (``state["test"]["final"]``; a run without a
final test: its last incumbent and checkpoint), so only a finished run (status ``done``) has one. A
Harness-S run that routed its test exports its pool and router with the final checkpoint (``routed``);
a run whose harness is a user's agent exports its params and factory (``agent``). The adapter's files
are checked (``coevo.models.adapters.check_adapter``) and copied, every file is checksummed, and the
folder is written under a temporary name and renamed into place, so a folder appears whole or not at all.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from coevo.app.agent_folder import copy_adapter, destination, move_into_place, serving_files, unwritable, write_json
from coevo.app.decompose import stored_config
from coevo.app.release import (
    ADAPTER,
    MANIFEST,
    AgentManifest,
    EnvInfo,
    coevo_version,
    point,
    sha256,
)
from coevo.app.run import RunError, find_run, read_state
from coevo.config import RunConfig
from coevo.envs.base import Env
from coevo.evaluation.results import TaskOutcome, outcome_estimate, paired_difference
from coevo.harnesses.spec import HarnessSpec, load_harness
from coevo.records import Checkpoint, EvaluationRecord, ExportRecord, HarnessRecord, RunRecord
from coevo.records.fields import new_id
from coevo.report.card import CardFacts, ScoreRow, agent_card
from coevo.storage import Archive
from coevo.strategies import STRATEGIES


@dataclass(frozen=True)
class Exported:
    """What ``export_agent`` wrote: the agent ``folder`` (``DIR`` or ``DIR/vN``), its archive ``record``
    and its ``manifest``."""

    folder: Path
    record: ExportRecord
    manifest: AgentManifest


def _get(summary: Any, key: str) -> Any:
    return summary.get(key) if isinstance(summary, Mapping) else getattr(summary, key, None)


def final_pair_ids(state: Mapping[str, Any]) -> tuple[str, str] | None:
    """(harness id, checkpoint id) of the pair a run ended on: the one its final test measured, else its
    incumbent and checkpoint; None when the state names neither."""
    final = (state.get("test") or {}).get("final")
    if final is not None:
        return _get(final, "harness_id"), _get(final, "checkpoint_id")
    if state.get("incumbent") and state.get("checkpoint"):
        return state["incumbent"], state["checkpoint"]
    return None


def routed(state: Mapping[str, Any]) -> bool:
    """Whether the run's final test routed tasks over a Harness-S pool (``rank1``, ... rows)."""
    return any(key.startswith("rank") for key in state.get("test") or {})


def export_command(run_id: str, db: str) -> str:
    """The command that exports run ``run_id``'s final pair from the archive ``db``."""
    return f"coevo export {run_id} -o agents/{run_id} --db {db}"


def _no_final_pair(run: RunRecord, db: str, state: Mapping[str, Any]) -> RunError:
    now = final_pair_ids(state)
    holds = (f" (its incumbent now: --harness {now[0][:12]} --checkpoint {now[1]})" if now else "")
    what = ("it is still running: wait until it finishes" if run.status == "running"
            else f"continue it with `coevo run --resume {run.id} --db {db}`")
    return RunError(f"run {run.id} has no final pair yet: its status is {run.status!r}; {what}, or export a pair it "
                    f"holds now with `coevo export {run.id} -o DIR --harness ID --checkpoint ID`{holds}")


def _commit() -> str | None:
    """The git commit of the coevo checkout this runs from (``+dirty`` when tracked files changed); None
    outside a git checkout."""
    here = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=here, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip()[:12] + ("+dirty" if dirty.returncode == 1 else "")


def _tools(env: Env, specs: list[HarnessSpec]) -> list[str]:
    """The names of ``env``'s tools some spec of ``specs`` exposes (from an episode of its first task; a
    user agent's only when its factory takes the episode's tools)."""
    from coevo.harnesses.agent import load_agent as load_factory

    task = next((t for split in ("test", "val", "train") for t in env.tasks(split, 1)), None)  # type: ignore[arg-type]
    if task is None:
        return []
    episode = env.episode(task, 0)
    try:
        names = [t.name for t in episode.tools]
    finally:
        episode.close()
    shown = set()
    for spec in specs:
        if spec.agent is not None and not load_factory(spec.agent).takes_tools:
            continue
        exposed = spec.tool_view.exposed
        shown |= {n for n in names if exposed is None or n in exposed}
    return [n for n in names if n in shown]


def _outcomes(per_task: Mapping[str, Any]) -> dict[str, TaskOutcome]:
    return {t: o if isinstance(o, TaskOutcome) else TaskOutcome.model_validate(o) for t, o in per_task.items()}


def _row(label: str, summary: Any) -> tuple[ScoreRow, dict[str, TaskOutcome]]:
    """A card row from an ``EvalSummary`` of the run's state or an ``EvaluationRecord``'s aggregates."""
    if isinstance(summary, EvaluationRecord):
        per_task = _outcomes(summary.aggregates.get("per_task", {}))
        h, c, k, trivial = summary.harness_id, summary.checkpoint_id, summary.k, summary.aggregates.get(
            "trivial_baseline")
    else:
        per_task = _outcomes(_get(summary, "per_task") or {})
        h, c, trivial = _get(summary, "harness_id"), _get(summary, "checkpoint_id"), _get(summary, "trivial_baseline")
        k = max((len(o.seeds) for o in per_task.values()), default=1)
    return ScoreRow(label, h, c, outcome_estimate(per_task), outcome_estimate(per_task, "pass_at_k"), k,
                    trivial), per_task


def _stored_test(archive: Archive, run_id: str, harness: str, checkpoint: str) -> EvaluationRecord | None:
    done = [e for e in archive.list(EvaluationRecord, run_id=run_id, harness_id=harness)
            if e.checkpoint_id == checkpoint and e.split == "test" and e.status == "done" and e.aggregates]
    return done[-1] if done else None


def _scores(archive: Archive, run: RunRecord, state: Mapping[str, Any], pair: tuple[str, str],
            final: bool) -> tuple[list[ScoreRow], list[tuple[str, Any]]]:
    """The card's test rows and paired differences: the run's own final test for its final pair, else the
    stored test evaluations of the pair and of the start pair."""
    test = state.get("test") or {}
    if final and test.get("start") is not None:
        start, start_outcomes = _row("start pair (H0, W0)", test["start"])
        label = "final checkpoint under H0" if routed(state) else "this agent (final pair)"
        end, end_outcomes = _row(label, test["final"])
        rows, diffs = [start, end], [("final − start", paired_difference(start_outcomes, end_outcomes))]
        for rank in sorted(k for k in test if k.startswith("rank")):
            name = f"{rank[:4].title()}-{rank[4:]} routing" + (" (this agent)" if rank == "rank1" else "")
            row, outcomes = _row(name, test[rank])
            rows.append(row)
            if rank == "rank1":
                diffs.append(("Rank-1 routing − start", paired_difference(start_outcomes, outcomes)))
        return rows, diffs
    tested = _stored_test(archive, run.id, *pair)
    if tested is None:
        return [], []
    rows, diffs = [], []
    begin = (state.get("start_harness"), state.get("start_checkpoint"))
    start = _stored_test(archive, run.id, *begin) if all(begin) and begin != pair else None
    row, outcomes = _row("this agent", tested)
    if start is not None:
        start_row, start_outcomes = _row("start pair (H0, W0)", start)
        rows.append(start_row)
        diffs.append(("this agent − start", paired_difference(start_outcomes, outcomes)))
    return [*rows, row], diffs


def _decomposition(archive: Archive, run_id: str) -> tuple[str, dict[str, str], Any] | None:
    """The run's newest ``coevo decompose`` with its effects (title, cell ids, ``Effects``), or None."""
    from coevo.report.decompose import stored_decompositions

    for record, numbers in stored_decompositions(archive, run_id):
        ids = {"h0": record.harnesses["start"], "hf": record.harnesses["final"],
               "w0": record.checkpoints["start"], "wf": record.checkpoints["final"]}
        return f"{record.env}/{record.split}, k = {record.k}, {numbers.n} tasks.", ids, numbers
    return None


def _lineage(archive: Archive, harness_id: str) -> list[tuple[str, str, str]]:
    """(id, name, origin) of each harness from the root of ``harness_id``'s first-parent line to it."""
    chain, seen, at = [], set(), harness_id
    while at and at not in seen:
        seen.add(at)
        record = archive.get(HarnessRecord, at)
        if record is None:
            chain.append((at, "", "not in the archive"))
            break
        chain.append((at, str(record.spec.get("name", "")), record.origin))
        at = record.parents[0] if record.parents else ""
    return chain[::-1]


def _checkpoints(archive: Archive, checkpoint_id: str) -> list[tuple[str, str]]:
    """(id, what made it) of each checkpoint from W0 to ``checkpoint_id`` along first parents."""
    chain, seen, at = [], set(), checkpoint_id
    while at and at not in seen:
        seen.add(at)
        record = archive.get(Checkpoint, at)
        if record is None:
            chain.append((at, "not in the archive"))
            break
        stage = record.config.get("stage")
        chain.append((at, f"{stage} stage of run {record.run_id}" if stage else
                      ("base weights" if not record.adapter_path else "adapter")))
        at = record.parents[0] if record.parents else ""
    return chain[::-1]


async def export_agent(db: str, run_id: str, out: str | Path, harness: str | None = None,
                       checkpoint: str | None = None, version: bool = False, force: bool = False,
                       archive: Archive | None = None, env: Env | None = None) -> Exported:
    """Write the agent folder of run ``run_id``'s final pair (``harness`` and/or ``checkpoint``: ids or
    unique prefixes of another pair of the archive) to ``out`` (module docstring; the layout:
    ``coevo.app.release``), or with ``version`` to ``out/vN`` with ``out/current`` pointing at it, and
    record it in the archive (``ExportRecord``). ``force`` replaces a folder coevo exported before.

    ``archive`` (default: opened from ``db``) and ``env`` (default: the run's env, built to name the tools
    the agent sees) are for tests. Raises ``RunError`` for an unknown run, an evaluation run, a run with no
    final pair yet (naming its status and the fix) or an env that cannot be built; ``ArchiveError`` for an
    unknown id; ``CheckpointError`` for a missing or damaged adapter; ``AgentFolderError`` for a
    destination that exists (without ``force``) or is no export."""
    if archive is None:  # opened here, so closed here (a library caller may export many times in one process)
        with Archive(db) as opened:
            return await export_agent(db, run_id, out, harness, checkpoint, version, force, opened, env)
    run = find_run(archive, run_id, db)
    if run.strategy not in STRATEGIES:
        raise RunError(f"run {run.id} is a {run.strategy or 'coevo eval'} run, not a meta-loop run: export the run "
                       "whose pair it evaluated (`coevo archive list runs` lists them)")
    config: RunConfig = stored_config(run, db)
    state = await read_state(db, run.id, run.strategy)
    final = final_pair_ids(state) if run.status == "done" else None
    if (harness is None or checkpoint is None) and final is None:
        raise _no_final_pair(run, db, state)
    explicit = harness is not None or checkpoint is not None
    pair = (archive.resolve_id("harnesses", harness) if harness else final[0],  # type: ignore[index]
            archive.resolve_id("checkpoints", checkpoint) if checkpoint else final[1])  # type: ignore[index]
    record, ckpt = archive.get(HarnessRecord, pair[0]), archive.get(Checkpoint, pair[1])
    if record is None or ckpt is None:
        raise RunError(f"run {run.id}'s final pair ({pair[0][:12]}, {pair[1]}) is not in the archive {db}: export "
                       "from the archive the run wrote (--db)")
    spec = load_harness(record.spec)
    kind = "agent" if spec.agent else "routed" if not explicit and routed(state) else "harness"
    bundle: dict[str, Any] | None = None
    specs = [spec]
    if kind == "routed":
        from coevo.app.bundle import router_bundle

        bundle = router_bundle(archive, run.id)
        specs = [load_harness(s) for s in bundle["pool"].values()]
    if env is None:
        from coevo.envs.registry import get_env

        try:
            env = get_env(config.env.ref, **config.env.settings())
        except (KeyError, ImportError, TypeError, ValueError) as err:
            message = err.args[0] if isinstance(err, KeyError) and err.args else err
            raise RunError(f"run {run.id}'s env {config.env.ref!r} cannot be built here ({message}), so the folder "
                           "cannot name the tools the agent sees: install what it needs, then export again") from None
    experience: list[str] = []
    if spec.bpe is not None:
        from coevo.harnesses.bpe import ArchiveExperience, experience_key

        key = experience_key(state.get("start_harness") or pair[0], config.env.model_dump(mode="json"))
        experience = ArchiveExperience(archive, run.id).lessons(key)
    out = Path(out).expanduser().resolve()
    recorded = max((r.version or 0 for r in archive.list(ExportRecord) if Path(r.path).parent == out), default=0)
    target, number = destination(out, version, force, recorded)
    export_id = new_id()
    tmp = target.with_name(f"{target.name}.partial-{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    except OSError as err:
        if number is not None:
            target.rmdir()
        raise unwritable(target, err) from None
    try:
        write_json(tmp / "harness.json", record.spec)
        if kind == "agent":
            from coevo.harnesses.agent import load_agent as load_factory

            write_json(tmp / "params.json", spec.model_dump(mode="json", include=set(load_factory(
                spec.agent or "").fields)))
        if bundle is not None:
            write_json(tmp / "router.json", bundle)
        if ckpt.adapter_path:
            copy_adapter(ckpt, tmp)
        files = {str(f.relative_to(tmp)): sha256(f) for f in sorted(tmp.rglob("*")) if f.is_file()}
        served = ckpt.model_ref if ckpt.model_ref and ckpt.model_ref != config.policy else None
        manifest = AgentManifest(
            coevo_version=coevo_version(), commit=_commit(), export_id=export_id, run_id=run.id,
            strategy=run.strategy, kind=kind, harness_id=pair[0], checkpoint_id=pair[1], policy=config.policy,
            adapter=ADAPTER if ckpt.adapter_path else None, served_as=served,
            env=EnvInfo(ref=config.env.ref, settings=config.env.settings(), name=env.name, tools=_tools(env, specs)),
            seed=config.seed, temperature=config.eval.temperature, experience=experience, version=number,
            files=files)
        (tmp / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n")
        serving_files(tmp)
        rows, diffs = _scores(archive, run, state, pair, final is not None and pair == final)
        facts = CardFacts(
            title=f"{spec.name} from run {run.id}", run_id=run.id, strategy=run.strategy, status=run.status,
            kind=kind, harness_id=pair[0], checkpoint_id=pair[1], policy=config.policy, adapter=manifest.adapter,
            exported_at=manifest.exported_at, coevo_version=manifest.coevo_version, commit=manifest.commit,
            env_ref=config.env.ref, tools=manifest.env.tools, seed=config.seed, temperature=config.eval.temperature,
            served_as=served, factory=spec.agent, pool=len(bundle["pool"]) if bundle else 0, version=number,
            lineage=_lineage(archive, pair[0]), checkpoints=_checkpoints(archive, pair[1]), scores=rows,
            differences=diffs, decomposition=_decomposition(archive, run.id), config=run.config, files=files)
        (tmp / "README.md").write_text(agent_card(facts))
        move_into_place(tmp, target, number is not None, force)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if number is not None and target.is_dir() and not any(target.iterdir()):
            target.rmdir()  # the reserved version number, unused
        raise
    exported = ExportRecord(id=export_id, run_id=run.id, harness_id=pair[0], checkpoint_id=pair[1], kind=kind,
                            path=str(target), version=number, created_at=manifest.exported_at)
    archive.put(exported)  # the folder is in place: recorded even if its pointer cannot be moved
    if number is not None:
        serving_files(target.parent)
        point(target.parent, number)
    return Exported(target, exported, manifest)


def run_export(db: str, run_id: str, out: str | Path, **options: Any) -> Exported:
    """``export_agent`` from synchronous code (the CLI)."""
    return asyncio.run(export_agent(db, run_id, out, **options))
