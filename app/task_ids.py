"""A resumed run's task ids against those its env gives now.

A run's saved graph state and records name its tasks by id: the tasks a live harness's
demonstrations answer (sealed from every weight stage and score), the failed train tasks a direction
cites, the val and test tasks of its evaluations. A task id names the env config it came from
(``coevo.envs.common.task_id``); a run started by a coevo whose ids did not (or whose env now builds
other tasks) would resume with ids that match none of its env's, and its sealed tasks would silently
stop being left out of training. ``check_task_ids`` refuses such a resume instead. The run's records
stay readable (``coevo archive list``, ``coevo report``, ``coevo export`` read the stored ids); there is
no migration of old ids, because mapping one needs the env config of every run that wrote a task
and the suite (its dataset, its game files) to rebuild it.
"""

from __future__ import annotations

from typing import Any

from coevo.envs.base import SPLITS, Env
from coevo.errors import CoevoError
from coevo.masking import redact
from coevo.records import EvaluationRecord


class StaleTaskIdsError(CoevoError, ValueError):
    """A run's stored task ids are not among the ids its env gives now; the message names the run, an
    example id and what to do."""


def unknown_task_ids(archive: Any, run_id: str, env: Env) -> dict[str, list[str]]:
    """Per split, the task ids the run's stored evaluations of ``env`` (same env name) hold that
    ``env.tasks(split)`` (all of the split) does not give, in stored order without repeats; a split
    with none is left out. Reads the archive through ``list`` only."""
    stored: dict[str, dict[str, None]] = {}
    for record in archive.list(EvaluationRecord, run_id=run_id):
        if record.env == env.name and record.split in SPLITS:
            stored.setdefault(record.split, {}).update(dict.fromkeys(record.task_ids))
    out: dict[str, list[str]] = {}
    for split, ids in stored.items():
        known = {t.id for t in env.tasks(split)}  # type: ignore[arg-type]
        missing = [i for i in ids if i not in known]
        if missing:
            out[split] = missing
    return out


def check_task_ids(archive: Any, run_id: str, env: Env, env_ref: str) -> None:
    """Raise ``StaleTaskIdsError`` when the run ``run_id`` stored evaluations of tasks that ``env`` (built
    from ``env_ref``, the run's env reference) does not give: a run started before task ids named their
    env config, or whose suite now builds other tasks. Nothing is changed either way."""
    unknown = unknown_task_ids(archive, run_id, env)
    if not unknown:
        return
    counts = ", ".join(f"{len(ids)} {split}" for split, ids in unknown.items())
    example = next(iter(unknown.values()))[0]
    raise StaleTaskIdsError(
        f"run {run_id} cannot be resumed: its stored evaluations name tasks that env {redact(env_ref)!r} does not "
        f"give now ({counts} task id(s), e.g. {example!r}); it was started by a coevo whose task ids did not name "
        "their env config, or its suite now builds other tasks, so the tasks it sealed from training would no "
        "longer be recognised. Finish it with the coevo that started it, or start a new run (coevo run); its "
        "records stay readable (coevo archive list, coevo report, coevo export)")
