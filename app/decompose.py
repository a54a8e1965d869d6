"""``coevo decompose RUN``: evaluate the 2×2 of (H0, H_final) × (W0, W_final) of a finished run on its
test split, with the run's tasks, seeds, k and temperature, and store which evaluations fill it
(``coevo.records.Decomposition``; the numbers: ``coevo.evaluation.decompose``).

The cells H0×W0 and H_final×W_final are the run's own final test (``final_test``): with the run's env
and k they have the same evaluation ids, so they are read back, not rerun. Every evaluation is stored
under the run's id as it finishes, so an interrupted decomposition continues where it stopped when the
same command is run again (like ``coevo eval --run-id``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from coevo.app.run import RunError, find_run, read_state
from coevo.app.services import PolicyCache
from coevo.config import RunConfig
from coevo.envs.base import Env
from coevo.envs.registry import get_env
from coevo.evaluation.decompose import CELLS, Effects, effects
from coevo.evaluation.executors import make_executor
from coevo.evaluation.results import EvalResult
from coevo.harnesses.bpe import ArchiveExperience
from coevo.meta.context import MetaContext
from coevo.observe.progress import NullReporter, Reporter
from coevo.records import Decomposition, RunRecord
from coevo.storage import Archive


@dataclass(frozen=True)
class Decomposed:
    """What ``decompose`` returns: the stored ``record``, each cell's ``EvalResult`` by cell name and the
    ``Effects`` computed from them."""

    record: Decomposition
    results: dict[str, EvalResult]
    numbers: Effects


def final_pair(state: dict[str, Any], run: RunRecord) -> tuple[dict[str, str], dict[str, str]]:
    """The run's (harnesses, checkpoints), each ``{"start": ..., "final": ...}``, from its final test
    (``state["test"]``). Raises ``RunError`` naming the run and the fix when it has none yet (a run
    still going, paused, failed, or configured with ``env.n_test = 0``)."""
    test = state.get("test") or {}
    if any(key.startswith("rank") for key in test):
        raise RunError(f"run {run.id} routes each task to a harness of its pool (Harness-S): its final pair is H0 "
                       "under W_final plus a router, not one final harness, so a 2x2 of harnesses would report a "
                       "harness effect of 0 by construction; compare its Rank-k test rows in `coevo report "
                       f"{run.id}` instead")
    if "start" not in test or "final" not in test:
        why = (f"its status is {run.status!r}: finish it first with coevo run --resume {run.id}"
               if run.status != "done" else "it ran no final test (env.n_test = 0 in its config)")
        raise RunError(f"run {run.id} has no final pair to decompose: {why}")
    start, final = test["start"], test["final"]
    return ({"start": start.harness_id, "final": final.harness_id},
            {"start": start.checkpoint_id, "final": final.checkpoint_id})


def stored_config(run: RunRecord, db: str) -> RunConfig:
    """The run's config as stored, on the archive ``db``, with no rollout cap (a decomposition is
    measurement, outside any budget). Raises ``RunError`` for a run that is not a meta-loop run or whose
    stored config this coevo cannot read."""
    if run.strategy == "eval":
        raise RunError(f"run {run.id} is a coevo eval run, which has one harness and one checkpoint: decompose a "
                       "coevo run (`coevo archive list runs` shows them)")
    try:
        config = RunConfig.model_validate(run.config)
    except ValidationError as err:
        raise RunError(f"run {run.id}'s stored config does not validate with this coevo ({err.error_count()} "
                       f"problem(s)): decompose it with the coevo that ran it") from None
    return config.model_copy(update={"db": db, "budget": 0})


def decomposition_id(run_id: str, env: Env, split: str, k: int, cells: dict[str, str]) -> str:
    """A stable id: a digest of the run, the env (name and config), the split, k and the cells' evaluation ids."""
    parts = [run_id, env.name, getattr(env, "config", {}), split, k, sorted(cells.items())]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


async def decompose(db: str, run_id: str, env_ref: str | None = None, k: int | None = None,
                    reporter: Reporter | None = None, archive: Archive | None = None,
                    context: MetaContext | None = None) -> Decomposed:
    """Evaluate the four cells of run ``run_id`` (an id or unique prefix) in the archive ``db`` on the test
    split: the run's own env and ``eval.k`` unless ``env_ref`` (another env reference, e.g. the same suite
    drawn from another seed; its first ``env.n_test`` test tasks) or ``k`` say otherwise; the run's seed
    and eval temperature always. Stores the
    evaluations and the ``Decomposition`` and returns them with their ``Effects``.

    ``archive`` (default: opened from ``db``) and ``context`` (the services that evaluate; default: the
    run's policies per checkpoint) are for tests. Raises ``RunError`` for an unknown run, one with no final
    pair, or an env reference that cannot be built; ``KeyError`` for a checkpoint the archive lacks."""
    archive = archive or Archive(db)
    run = find_run(archive, run_id, db)
    config = stored_config(run, db)
    harnesses, checkpoints = final_pair(await read_state(db, run.id, run.strategy), run)
    if context is None:
        try:
            env = get_env(env_ref or config.env.ref, **config.env.settings())
        except (KeyError, ImportError, TypeError, ValueError) as err:
            message = err.args[0] if isinstance(err, KeyError) and err.args else err
            raise RunError(f"--env {env_ref or config.env.ref!r} cannot be built: {message}") from None
        executor = None if config.executor == "inprocess" else make_executor(config.executor)
        context = MetaContext(config=config, env=env, archive=archive, policy=PolicyCache(config, archive),
                              reporter=reporter or NullReporter(), run_id=run.id, executor=executor,
                              experience=ArchiveExperience(archive, run.id))  # a BPE harness's lessons, as the run
    ctx = dataclasses.replace(context, run_id=run.id, config=config)  # as run_meta does: the run's id
    tasks = ctx.tasks("test")
    if not tasks:
        raise RunError(f"env {ctx.env.name!r} has no test tasks for run {run.id} (env.n_test = "
                       f"{config.env.n_test}): pass --env with a reference that has a test split")
    k = k or config.eval.k
    results: dict[str, EvalResult] = {}
    for cell, (h, w) in CELLS.items():  # one at a time: each cell's policy holds the engine while it decodes
        results[cell] = await ctx.evaluate(harnesses[h], checkpoints[w], "test", tasks=tasks, k=k)
    cells = {cell: r.evaluation_id for cell, r in results.items()}
    record = Decomposition(id=decomposition_id(run.id, ctx.env, "test", k, cells), run_id=run.id, env=ctx.env.name,
                           split="test", k=k, harnesses=harnesses, checkpoints=checkpoints, cells=cells)
    previous = archive.get(Decomposition, record.id)
    if previous is not None:
        record.created_at = previous.created_at
    archive.put(record)
    return Decomposed(record, results, effects({c: r.per_task for c, r in results.items()}))


def run_decompose(db: str, run_id: str, env_ref: str | None = None, k: int | None = None,
                  reporter: Reporter | None = None) -> Decomposed:
    """``decompose`` from synchronous code (the CLI)."""
    return asyncio.run(decompose(db, run_id, env_ref, k, reporter))
