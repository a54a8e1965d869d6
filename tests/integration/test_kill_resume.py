"""Crash safety the hard way (issue 17, item 7): a ``coevo run`` process is SIGKILLed during the
weight stage, its ``coevo run --resume`` (started from another working directory) is SIGKILLed during
validation, and a second ``--resume`` (from a third) finishes it with the same final summary, harness ids,
scores and archive row counts as an uninterrupted run with the same seeds (run in the test's own process).

The policy is the tiny random Llama of ``tests/training_kit.py`` saved with a chat template and
referenced as ``local:<dir>``: real GRPO through TRL and real local generation, in seconds. The
kill moment is found by polling the run's checkpointed graph and its archive, never by sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from training_kit import char_tokenizer, tiny_llama_checkpoint
from typer.testing import CliRunner

import coevo
from coevo.app.run import run_snapshot
from coevo.cli.app import app
from coevo.harnesses import load_harness
from coevo.records import Checkpoint, EditRecord, EvaluationRecord, GateDecision, HarnessRecord, RunRecord, Trajectory
from coevo.storage import Archive

pytestmark = pytest.mark.integration

DEADLINE_S = 600
TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}assistant: {% endif %}")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-llama")
    tiny_llama_checkpoint(folder)
    tokenizer = char_tokenizer()
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(str(folder))
    return folder


def start_folder(root: Path, model: Path) -> Path:
    """A folder with a small VACE config whose paths are relative to it (the run stores them absolute), and
    H0 with a 48-token reply budget: random weights never stop, and at H0's 256 most of a run was decoding,
    while 48 still keeps validation going long enough for the poll to catch it."""
    root.mkdir()
    h0 = load_harness("reasoning_gym").model_dump(mode="json")
    h0["budget"]["max_output_tokens"] = 48
    (root / "h0.json").write_text(json.dumps(h0))
    (root / "run.toml").write_text(f"""
strategy = "vace"
rounds = 1
seed = 0
db = "runs/coevo.db"
out_dir = "runs"
policy = "local:{model}"
harness = "h0.json"
[env]
ref = "reasoning_gym:families=chain_sum,size=40"
n_train = 2
n_val = 4
n_test = 2
[train]
steps = 1
tasks_per_step = 2
num_generations = 2
max_new_tokens = 8
[eval]
concurrency = 1
""")
    return root


def coevo_run(cwd: Path, *args: str) -> subprocess.Popen:
    """``coevo run ARGS`` in ``cwd`` as a child process; stdout and stderr go to files in ``cwd``."""
    package_root = str(Path(coevo.__file__).parent.parent)  # where ``import coevo`` found this checkout
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    tag = "resume" if "--resume" in args else "run"
    return subprocess.Popen([sys.executable, "-m", "coevo.cli.app", "run", *args, "--no-report"], cwd=cwd, env=env,
                            stdout=open(cwd / f"{tag}.out", "w"), stderr=open(cwd / f"{tag}.err", "w"))


def finish(proc: subprocess.Popen, cwd: Path) -> str:
    """Wait for ``proc`` (bounded); its stdout. Fails with its output when it does not end with 0."""
    tag = "resume" if "--resume" in proc.args else "run"
    try:
        proc.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    out, err = (cwd / f"{tag}.out").read_text(), (cwd / f"{tag}.err").read_text()
    assert proc.returncode == 0, f"coevo run exited {proc.returncode}\n{out}\n{err[-3000:]}"
    return out


def poll(proc: subprocess.Popen, db: Path, what: str, ready, run_id: str | None = None) -> str:
    """Wait for the run's ``setup`` line in its ``run.out`` beside ``db``'s folder (its archive and checkpointer
    exist from then on: opening them earlier would race their creation) unless ``run_id`` is known (a resumed
    run's are), then poll its archive and checkpointed graph until ``ready(archive, run_id, snapshot)``; returns
    the run id. Fails if the process ends first or the deadline passes."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"coevo run ended ({proc.returncode}) before {what}"
        if run_id is None:
            started = re.search(r"setup +run (\S+):", (db.parent.parent / "run.out").read_text())
            run_id = started and started.group(1)
        if run_id is not None:
            with Archive(db) as archive:
                if ready(archive, run_id, asyncio.run(run_snapshot(str(db), run_id, "vace"))):
                    return run_id
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no {what} within {DEADLINE_S} s")


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL


def summary(stdout: str, run_id: str) -> str:
    """The printed summary table, the run id masked (up to the report line: the lines after it name the
    run's own folders, such as the final pair's adapter path)."""
    start = stdout.index(f"run {run_id}: summary")
    end = min(i for i in (stdout.find(mark, start) for mark in ("report", "final pair", "archive: ")) if i >= 0)
    table = stdout[start:end]
    return table.replace(run_id, "RUN")


def outcome(db: Path, run_id: str) -> dict:
    """What must match an uninterrupted run: harness ids, decisions, scores, and every row count."""
    with Archive(db) as archive:
        evaluations = archive.list(EvaluationRecord, run_id=run_id)
        return {
            "runs": [r.status for r in archive.list(RunRecord)],
            "harnesses": sorted(h.id for h in archive.list(HarnessRecord, run_id=run_id)),
            "edits": sorted((e.child_id, e.status) for e in archive.list(EditRecord, run_id=run_id)),
            "decisions": sorted((d.round, d.candidate_id, d.accepted, d.b, d.c) for d in
                                archive.list(GateDecision, run_id=run_id)),
            "scores": sorted((e.harness_id, e.split, len(e.task_ids), e.status, e.aggregates.get("mean_reward"))
                             for e in evaluations),
            "trajectories": len(archive.list(Trajectory, run_id=run_id)),
            "trajectories per evaluation": sorted(archive.count(Trajectory, evaluation_id=e.id) for e in evaluations),
            "train trajectories": len(archive.list(Trajectory, run_id=run_id, split="train")),
            "checkpoints": len(archive.list(Checkpoint)),
        }


@pytest.fixture(scope="module")
def reference(tiny_model, tmp_path_factory) -> tuple[str, dict]:
    """The uninterrupted run: its summary and outcome. It runs in this process (``coevo run`` through typer's
    test runner, from its folder): only the runs that are killed need a process of their own, and each costs
    about 15 CPU-seconds of imports (torch, transformers, PEFT, TRL) on the 2-core box before it starts."""
    folder = start_folder(tmp_path_factory.mktemp("reference") / "run", tiny_model)
    with contextlib.chdir(folder):
        result = CliRunner().invoke(app, ["run", "run.toml", "--no-report"])
    assert result.exit_code == 0, result.output
    run_id = re.search(r"run id: (\S+)", result.output).group(1)
    return summary(result.output, run_id), outcome(folder / "runs" / "coevo.db", run_id)


def kill_when(proc: subprocess.Popen, db: Path, what: str, ready, killed, run_id: str | None = None) -> str:
    """SIGKILL ``proc`` once ``ready`` holds (``poll``), then check ``killed(archive, run_id, snapshot)`` on what the
    dead process left; the run id."""
    run_id = poll(proc, db, what, ready, run_id)
    kill(proc)
    with Archive(db) as archive:
        assert archive.get(RunRecord, run_id).status == "running"  # a killed process marks nothing
        killed(archive, run_id, asyncio.run(run_snapshot(str(db), run_id, "vace")))
    return run_id


def resume(tmp_path: Path, name: str, run_id: str, db: Path) -> subprocess.Popen:
    """``coevo run --resume RUN_ID --db DB`` from a new, empty working directory ``tmp_path / name``."""
    elsewhere = tmp_path / name
    elsewhere.mkdir()
    return coevo_run(elsewhere, "--resume", run_id, "--db", str(db))


def _val_rollouts_on_disk(archive, run_id) -> int:
    return sum(archive.count(Trajectory, evaluation_id=e.id)
               for e in archive.list(EvaluationRecord, run_id=run_id, split="val"))


def test_a_run_killed_in_the_weight_stage_then_in_validation_resumes_to_the_same_end(tiny_model, reference,
                                                                                      tmp_path):
    def in_training(archive, run_id, snapshot):
        return snapshot.next == ("train",)

    def stage_unfinished(archive, run_id, snapshot):
        assert snapshot.next == ("train",) and len(archive.list(Checkpoint)) == 1  # W0 only: no trained one

    def mid_validation(archive, run_id, snapshot):
        return snapshot.next == ("validate",) and _val_rollouts_on_disk(archive, run_id) >= 1

    def validation_unfinished(archive, run_id, snapshot):
        # killed with the gate's validation next: the stage effect's val rollouts (H0 under W0 and W1) are on disk
        # and the resume reuses them; whether any candidate rollout was written before the kill is not pinned
        assert snapshot.next == ("validate",) and _val_rollouts_on_disk(archive, run_id) >= 1

    folder = start_folder(tmp_path / "run", tiny_model)
    db = folder / "runs" / "coevo.db"
    run_id = kill_when(coevo_run(folder, "run.toml"), db, "the weight stage", in_training, stage_unfinished)
    kill_when(resume(tmp_path, "elsewhere", run_id, db), db, "validation", mid_validation, validation_unfinished,
              run_id)
    out = finish(resume(tmp_path, "third", run_id, db), tmp_path / "third")
    for name in ("elsewhere", "third"):  # a resume writes only into the run's own folders
        assert not (tmp_path / name / "runs").exists() and not (tmp_path / name / "coevo_runs").exists()
    assert (summary(out, run_id), outcome(db, run_id)) == reference
    with Archive(db) as archive:
        adapters = [c.adapter_path for c in archive.list(Checkpoint) if c.adapter_path]
    assert len(adapters) == 1 and Path(adapters[0]).is_absolute() and Path(adapters[0]).is_dir()
