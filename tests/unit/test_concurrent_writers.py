"""Concurrent writers: two `coevo run` processes (their LangGraph checkpointers in the same database) and two
`coevo eval` processes write one archive at once, on SQLite and on PostgreSQL, and lose and raise nothing: every row
they write is counted (fakes from ``test_meta_loop`` through ``fake_cli.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import SQLModel

from coevo.harnesses.spec import HarnessSpec, Prompt
from coevo.records import EvaluationRecord, HarnessRecord, RunRecord, Trajectory
from coevo.storage import Archive

FAKE_CLI = Path(__file__).parent / "fake_cli.py"
K = 16
"""Rollouts per task of each evaluation (the words env has 4 val tasks)."""


def start(*args: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, str(FAKE_CLI), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)


DEADLINE_S = 300
"""How long a process may take: each takes under 65 s on the shared 2-core box beside another heavy test file
(pytest -n 2); one still running after this is stuck, not slow (two runs setting up a new PostgreSQL archive's
checkpoint tables once waited for each other for good: ``coevo.app.checkpointer.setup_lock``)."""


def finish(proc: subprocess.Popen) -> str:
    """The process's output once it exits 0 without a traceback or a lock error. One still running after
    ``DEADLINE_S`` fails the test with every thread's stack (``fake_cli``'s SIGUSR1) and its output."""
    try:
        out, _ = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"`{' '.join(proc.args[2:4])}` still ran after {DEADLINE_S} s; where it was:\n{out[-8000:]}")
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


def ids_of_run(db: str, table_name: str, run_id: str) -> set[str]:
    """The ids of the rows of ``table_name`` whose ``run_id`` is ``run_id``."""
    with Archive(db) as archive, archive.engine.connect() as conn:
        table = SQLModel.metadata.tables[table_name]
        return set(conn.execute(select(table.c.id).where(table.c.run_id == run_id)).scalars())


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """The database and run id of the run when it runs alone (SQLite)."""
    folder = tmp_path_factory.mktemp("alone")
    db = str(folder / "alone.db")
    out = finish(start("run", str(run_files(folder, db)), "--no-report"))
    return db, run_id_of(out)


@pytest.fixture(scope="module")
def reference(alone):
    """The run's rows when it runs alone, per table."""
    return rows_of_run(*alone)


SHARED = ("harnesses", "policy_checkpoints")
"""Tables of content-addressed rows two runs of one config both store (H0, an edit's child, W0): one row,
owned by the run that stored it first."""


def test_two_runs_and_two_evals_write_one_archive_at_once_lose_nothing_and_archive_list_reads_them(db_url, tmp_path,
                                                                                                   alone, reference):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    configs = [run_files(tmp_path / "a", db_url), run_files(tmp_path / "b", db_url)]
    evals = [("eval", "--env", "words", "--harness", str(tmp_path / "a" / "h0.json"), "--model", "fake:x", "--k",
              str(K), "--concurrency", "8", "--seed", str(i), "--db", db_url, "--run-id", f"eval-{i}", "--create")
             for i in (1, 2)]
    procs = [*(start("run", str(c), "--no-report") for c in configs), *(start(*args) for args in evals)]
    outs = [finish(p) for p in procs]
    run_ids = [run_id_of(out) for out in outs[:2]]
    assert len(set(run_ids)) == 2 and reference["trajectories"] > 0
    own = {k: v for k, v in reference.items() if k not in SHARED}
    for run_id in run_ids:  # nothing lost, nothing duplicated, nothing taken by the other
        assert {k: v for k, v in rows_of_run(db_url, run_id).items() if k not in SHARED} == own
    for table in SHARED:  # each shared row once, owned by one of the two; each run's own rows kept
        owned = [ids_of_run(db_url, table, r) for r in run_ids]
        expected = {i.replace(alone[1], r) for r in run_ids for i in ids_of_run(alone[0], table, alone[1])}
        assert owned[0] | owned[1] == expected and not owned[0] & owned[1]
    with Archive(alone[0]) as archive:
        used = [(h.id, h.origin, h.parents) for h in archive.run_harnesses(alone[1])]
    with Archive(db_url) as archive:  # yet each run lists every harness it used, as the run alone does
        assert [[(h.id, h.origin, h.parents) for h in archive.run_harnesses(r)] for r in run_ids] == [used, used]
        assert {h[1] for h in used} >= {"base", "edit"}
        assert [archive.get(RunRecord, r).status for r in run_ids] == ["done", "done"]
        for i in (1, 2):
            (evaluation,) = archive.list(EvaluationRecord, run_id=f"eval-{i}")
            assert evaluation.status == "done" and archive.get(RunRecord, f"eval-{i}").status == "done"
            assert archive.count(Trajectory, evaluation_id=evaluation.id) == 4 * K
            assert len({t.id for t in archive.list(Trajectory, evaluation_id=evaluation.id)}) == 4 * K
    listed = subprocess.run([sys.executable, "-m", "coevo.cli.app", "archive", "list", "runs", "--db", db_url],
                            capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"}, timeout=300)
    assert listed.returncode == 0, listed.stderr
    assert all(r in listed.stdout for r in [*run_ids, "eval-1", "eval-2"]), listed.stdout


def test_a_spec_or_base_model_another_run_stored_first_stays_that_runs(tmp_path):
    """A harness row and W0 are content-addressed: a second run storing the same ones (after the first,
    or racing it) keeps the first run's row (its run, origin and parents) instead of taking it over."""
    from coevo.meta.recording import Recording
    from coevo.models.checkpoint import Checkpoint

    archive = Archive(tmp_path / "a.db")
    spec = HarnessSpec(name="h0")
    archive.add_harness(spec, [], "base", "run-a")
    assert archive.add_harness(spec, ["other"], "edit", "run-b") == spec.id
    stored = archive.list(HarnessRecord)
    assert [(h.run_id, h.origin, h.parents) for h in stored] == [("run-a", "base", [])]
    evaluated = HarnessSpec(name="e")
    archive.add_harness(evaluated, origin="cli")  # coevo eval's: no run owns it, so a run storing it claims it
    archive.add_harness(evaluated, [], "base", "run-b")
    assert archive.get(HarnessRecord, evaluated.id).run_id == "run-b"
    # each run reads the harnesses it stored as it stored them, whoever owns the row (RunHarness links)
    assert [(h.id, h.run_id, h.origin, h.parents) for h in archive.run_harnesses("run-b")] == [
        (spec.id, "run-b", "edit", ["other"]), (evaluated.id, "run-b", "base", [])]
    assert [(h.id, h.origin) for h in archive.run_harnesses("run-a")] == [(spec.id, "base")]
    first, second = Recording(), Recording()
    first.archive = second.archive = archive
    first.run_id, second.run_id = "run-a", "run-b"
    w0 = Checkpoint(id="base-1", base_model="fake")
    assert first.record_base_checkpoint(w0) == second.record_base_checkpoint(w0) == "base-1"
    assert [c.run_id for c in archive.list(Checkpoint)] == ["run-a"]
