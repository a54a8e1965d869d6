"""Concurrent writers: two `coevo eval` processes and one `coevo run` (its LangGraph checkpointer in the same
database) write one archive at once, on SQLite and on PostgreSQL, and lose and raise nothing: every row
they write is counted (fakes from ``test_meta_loop`` through ``fake_cli.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import SQLModel

from coevo.harnesses.spec import HarnessSpec, Prompt
from coevo.records import EvaluationRecord, RunRecord, Trajectory
from coevo.storage import Archive

FAKE_CLI = Path(__file__).parent / "fake_cli.py"
K = 16
"""Rollouts per task of each evaluation (the words env has 4 val tasks)."""


def start(*args: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, str(FAKE_CLI), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)


def finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "locked" not in out, out
    return out


def run_files(folder: Path, db: str) -> Path:
    h0 = HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.", output_format="Reply 'Final answer: X'."))
    (folder / "h0.json").write_text(h0.model_dump_json())
    (folder / "run.toml").write_text(
        f'db = "{db}"\nout_dir = "{folder}"\nharness = "{folder / "h0.json"}"\npolicy = "fake:words"\nrounds = 2\n'
        'strategy = "vace"\n[env]\nref = "words"\nn_train = 4\nn_val = 4\nn_test = 4\n[meta]\nlocal_check = false\n')
    return folder / "run.toml"


def run_id_of(output: str) -> str:
    return output.rsplit("run id: ", 1)[1].split()[0]


def rows_of_run(db: str, run_id: str) -> dict[str, int]:
    """Rows per archive table whose ``run_id`` is ``run_id``."""
    with Archive(db) as archive, archive.engine.connect() as conn:
        return {name: conn.execute(select(func.count()).select_from(table).where(table.c.run_id == run_id)).scalar()
                for name, table in SQLModel.metadata.tables.items() if "run_id" in table.c}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The run's rows when it runs alone (SQLite)."""
    folder = tmp_path_factory.mktemp("alone")
    db = str(folder / "alone.db")
    out = finish(start("run", str(run_files(folder, db)), "--no-report"))
    return rows_of_run(db, run_id_of(out))


def test_two_evals_and_a_run_write_one_archive_at_once_and_lose_nothing(db_url, tmp_path, reference):
    config = run_files(tmp_path, db_url)
    evals = [("eval", "--env", "words", "--harness", str(tmp_path / "h0.json"), "--model", "fake:x", "--k", str(K),
              "--concurrency", "8", "--seed", str(i), "--db", db_url, "--run-id", f"eval-{i}") for i in (1, 2)]
    procs = [start("run", str(config), "--no-report"), *(start(*args) for args in evals)]
    run_out, *_ = [finish(p) for p in procs]
    run_id = run_id_of(run_out)
    assert rows_of_run(db_url, run_id) == reference and reference["trajectories"] > 0
    with Archive(db_url) as archive:
        assert archive.get(RunRecord, run_id).status == "done"
        for i in (1, 2):
            (evaluation,) = archive.list(EvaluationRecord, run_id=f"eval-{i}")
            assert evaluation.status == "done" and archive.get(RunRecord, f"eval-{i}").status == "done"
            assert archive.count(Trajectory, evaluation_id=evaluation.id) == 4 * K
            assert len({t.id for t in archive.list(Trajectory, evaluation_id=evaluation.id)}) == 4 * K
