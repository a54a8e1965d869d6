"""Writes the archive fixtures of ``tests/unit/test_archive_fixture.py`` with the code of commit d0f3406
(main before the archive stored the domain models, issue 21): run it against THAT code, not this tree's.

    git worktree add /tmp/old d0f3406
    mkdir -p /tmp/oldpkg && ln -sfn /tmp/old /tmp/oldpkg/coevo     # `import coevo` -> the old tree
    PYTHONPATH=/tmp/oldpkg:/tmp/old/tests:/tmp/old/tests/unit OMP_NUM_THREADS=1 \\
        .venv/bin/python tests/data/make_archive_d0f3406.py tests/data

It runs four small offline jobs into one archive, once on SQLite and once on a throwaway PostgreSQL
server (``tests/pg_kit.py``): VACE (runs, harnesses, edits, checkpoints, tasks, evaluations,
trajectories, gate decisions, budgets), Harness-S (pool members, profiles, votes, a rule and an LLM
voter's calls), CoEvo-RSI (base choices, model proposals, promotions) and PACE (phases), with the
unit tests' fakes (``test_meta_loop``), plus a checkpoint published on vLLM servers (its ``config``
holds ``vllm`` and ``model_ref``, as ``StageTrainer`` wrote them). It writes, under the given directory:

- ``archive_d0f3406.sql``: the SQLite archive, ``sqlite3 .dump`` (LangGraph's checkpointer tables
  left out: they are not the archive's);
- ``archive_d0f3406.pg.sql``: the PostgreSQL archive, ``pg_dump --inserts`` of the archive's tables
  (psql-only ``\\restrict`` lines removed, so any client can replay it);
- ``archive_d0f3406.json``: per table, the rows as that code's ``Archive`` read them back
  (``model_dump(mode="json")``; a trajectory, the bulk of an archive, as its id and ``digest``: the
  sha256 of that dump as sorted-key JSON), from the SQLite archive. The
  PostgreSQL archive holds the same jobs (ids and times differ), so its expected rows are in
  ``archive_d0f3406.pg.json``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from pg_kit import PostgresServer
from test_meta_loop import WordEnv, policy

from coevo.config import RunConfig
from coevo.graphs.harness import arun_rollout
from coevo.harnesses.spec import HarnessSpec, Prompt
from coevo.meta.context import MetaContext
from coevo.meta.run import run_meta
from coevo.roles.curator import OfflineCurator
from coevo.roles.editor import OfflineEditor
from coevo.roles.inheritor import OfflineInheritor
from coevo.roles.profiler import OfflineProfiler
from coevo.roles.proposer import OfflineProposer
from coevo.roles.voter import LLMVoter, RuleVoter
from coevo.storage import Archive
from coevo.storage.tables import (
    BaseChoiceRecord,
    CheckpointRecord,
    ModelProposalRecord,
    PromotionRecord,
)

LANGGRAPH_TABLES = ("checkpoints", "writes", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")


class Trainer:
    """A fake weight stage: checkpoint ``<parent>+<run>r<round>`` (recorded under the run), the
    incumbent's rollouts on the train tasks; a failed task is routed once when ``route`` is given."""

    def __init__(self, env, model, archive, run_id):
        self.env, self.model, self.archive, self.run_id = env, model, archive, run_id

    async def __call__(self, checkpoint_id, spec, tasks, round, siblings=(), route=None, **phase):
        new = f"{checkpoint_id}+{self.run_id}r{round}"
        trajs = [await arun_rollout(spec, self.model, self.env, t, seed=0, checkpoint_id=new) for t in tasks]
        for task, traj in zip(tasks, trajs):
            if route is not None and not traj.passed:
                await route(task, 2)
        metrics = {"reward_mean": sum(t.reward for t in trajs) / len(trajs), "delta_norm": 0.25,
                   "history": [{"step": 0, "loss": 0.5}]}
        self.archive.add_checkpoint(CheckpointRecord(id=new, base_model="fake", parents=[checkpoint_id],
                                                     config={"incumbent_id": spec.id, "lr": 1e-4}, metrics=metrics,
                                                     run_id=self.run_id))
        return new, [t.model_copy(update={"id": f"{new}-{t.task_id}"}) for t in trajs]


def run(db: str, root: Path, strategy: str, run_id: str, **sections) -> None:
    """One offline run of ``strategy`` under ``run_id`` into the archive ``db``."""
    h0 = HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.", output_format="Reply 'Final answer: X'."))
    (root / "h0.json").write_text(h0.model_dump_json())
    config = RunConfig(strategy=strategy, rounds=1, db=db, harness=str(root / "h0.json"), policy="fake:words",
                       env={"ref": "words", "n_train": 4, "n_val": 3, "n_test": 2},
                       meta={"smoke_tasks": 2, "local_check": True, "local_tasks": 4, "local_controls": 0},
                       **sections)
    archive, env, model = Archive(db), WordEnv(), policy("help")
    voter = LLMVoter("openai/gpt-4o-mini", name="llm0", mock_response=json.dumps({"ranking": ["not-a-sibling"]}))
    ctx = MetaContext(config=config, env=env, archive=archive, policy=lambda ckpt: model,
                      trainer=None if strategy == "pace" else Trainer(env, model, archive, run_id),
                      curator=OfflineCurator(2), editor=OfflineEditor(), profiler=OfflineProfiler(),
                      voter=[RuleVoter(), voter], inheritor=OfflineInheritor(),
                      proposer=OfflineProposer(editor=OfflineEditor()))
    asyncio.run(run_meta(config, run_id=run_id, context=ctx, archive=archive))
    archive.close()


def fill(db: str, root: Path) -> None:
    """The four jobs and a vLLM-published checkpoint."""
    run(db, root, "vace", "vace-1")
    run(db, root, "harness_s", "hs-1", harness_s={"proposals": [2]})
    run(db, root, "coevo_rsi", "rsi-1")
    run(db, root, "pace", "pace-1", whale={"candidates": 2, "pace_patience": 1})
    with Archive(db) as archive:
        archive.add_checkpoint(CheckpointRecord(
            id="served-1", base_model="smollm2-135m", adapter_path="/runs/adapters/served-1", parents=["base-x"],
            config={"lr": 1e-4, "vllm": ["http://127.0.0.1:8001", "http://127.0.0.1:8002"],
                    "model_ref": "litellm:hosted_vllm/coevo-served-1"},
            metrics={"loss": 0.25}, run_id="vace-1"))


def expected(db: str) -> dict[str, list]:
    """Every archive table's rows as this code's ``Archive`` reads them back."""
    with Archive(db) as a:
        out = {"runs": a.list_runs(), "harnesses": a.list_harnesses(), "edits": a.list_edits(),
               "policy_checkpoints": a.list_checkpoints(), "evaluations": a.list_evaluations(),
               "trajectories": a.trajectories(), "gate_decisions": a.list_gate_decisions(),
               "profiles": a.list_profiles(), "pool_members": a.list_pool_members(), "votes": a.list_votes(),
               "llm_calls": a.list_llm_calls(), "budgets": a.list_budgets(), "phases": a.list_phases(),
               "base_choices": a.list_inheritance(BaseChoiceRecord),
               "model_proposals": a.list_inheritance(ModelProposalRecord),
               "promotions": a.list_inheritance(PromotionRecord)}
        with a.engine.connect() as conn:
            ids = [row[0] for row in conn.exec_driver_sql("SELECT id FROM tasks ORDER BY id")]
        out["tasks"] = [a.get_task(i) for i in ids]
    empty = [name for name, rows in out.items() if not rows]
    if empty:
        raise SystemExit(f"tables left empty by the jobs: {empty}")
    rows = {name: [r.model_dump(mode="json") for r in rows] for name, rows in out.items()}
    rows["trajectories"] = [{"id": t["id"], "digest": digest(t)} for t in rows["trajectories"]]
    return rows


def digest(row: dict) -> str:
    """The sha256 of ``row`` as sorted-key JSON."""
    return hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()


def write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")


def main(out: Path) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        db = str(root / "archive.db")
        fill(db, root)
        write_json(out / "archive_d0f3406.json", expected(db))
        with sqlite3.connect(db) as conn:
            for name in LANGGRAPH_TABLES:
                conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.close()
        dump = subprocess.run(["sqlite3", db, ".dump"], check=True, capture_output=True, text=True).stdout
        (out / "archive_d0f3406.sql").write_text(dump)
        with PostgresServer() as server:
            url = server.new_database()
            fill(url, root)
            write_json(out / "archive_d0f3406.pg.json", expected(url))
            excluded = [f"--exclude-table={name}" for name in LANGGRAPH_TABLES]
            dump = subprocess.run([str(server._bin / "pg_dump"), "--inserts", "--no-owner", "--no-privileges",
                                   *excluded, server.dsn(url.rsplit("/", 1)[1])],
                                  check=True, capture_output=True, text=True).stdout
            (out / "archive_d0f3406.pg.sql").write_text(re.sub(r"(?m)^\\(un)?restrict .*\n", "", dump))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
