"""``coevo export`` on the real small model at a tiny size: the default job's final pair (a trained LoRA
adapter), exported, copied elsewhere with the archive and ``coevo_runs/`` removed, loads with
``coevo.load_agent`` and answers the run's test tasks exactly as the final-pair evaluation did (greedy);
``langgraph dev`` in the copied folder serves it to the LangGraph SDK client. (A user agent and a Harness-S run:
``test_export_pool_smollm2.py``, a file of its own so the test runner can run the two beside each other.)"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from langchain_core.messages import AIMessage, messages_from_dict
from typer.testing import CliRunner

from coevo import load_agent
from coevo.app.export import final_pair_ids
from coevo.app.release import read_manifest
from coevo.app.run import read_state
from coevo.cli.app import app
from coevo.models.refs import clear_model_cache
from coevo.records import EvaluationRecord, RunRecord, Task, Trajectory
from coevo.storage import Archive

pytestmark = pytest.mark.integration

TINY = ["--set", "rounds=1", "--set", "env.n_train=2", "--set", "env.n_val=2", "--set", "env.n_test=3",
        "--set", "train.steps=1", "--set", "train.tasks_per_step=2", "--set", "train.num_generations=2",
        "--set", "eval.temperature=0", "--set", "eval.concurrency=1", "--set", "meta.smoke_tasks=1"]
"""The default job at a tiny size, tested greedily one rollout at a time (so the stored replies were decoded
unbatched, as ``load_agent``'s single requests are)."""


def run_cli(tmp_path: Path, *args: str) -> tuple[str, str]:
    """``coevo run ARGS`` with the tiny settings into ``tmp_path``; returns (run id, archive path)."""
    db = str(tmp_path / "coevo_runs" / "coevo.db")
    result = CliRunner().invoke(app, ["run", *args, "--db", db, "--no-report", *TINY,
                                      "--set", f"out_dir={tmp_path / 'coevo_runs'}"])
    assert result.exit_code == 0, result.output
    said = re.search(r"export it as an agent folder: coevo export (\S+) -o agents/\S+ --db (\S+)",
                     " ".join(result.output.split()))
    assert said, result.output  # the run summary names the final pair and the export command
    return said.group(1), said.group(2)


def export(run_id: str, db: str, out: Path) -> Path:
    result = CliRunner().invoke(app, ["export", run_id, "-o", str(out), "--db", db])
    assert result.exit_code == 0, result.output
    return out


def final_test(db: str, run_id: str) -> tuple[list[Task], dict[str, Trajectory]]:
    """The run's test tasks and the final-pair evaluation's trajectory of each (by task id)."""
    with Archive(db) as archive:
        run = archive.get(RunRecord, run_id)
        state = asyncio.run(read_state(db, run_id, run.strategy))
        evaluation = archive.get(EvaluationRecord, state["test"]["final"].evaluation_id)
        assert (evaluation.harness_id, evaluation.checkpoint_id) == final_pair_ids(state)
        tasks = [archive.get(Task, t) for t in evaluation.task_ids]
        trajectories = {t.task_id: t for t in archive.list(Trajectory, evaluation_id=evaluation.id)}
    return tasks, trajectories


def last_reply(messages: list) -> str:
    return next(m for m in reversed(messages) if isinstance(m, AIMessage)).content


def moved(folder: Path, tmp_path: Path) -> Path:
    """``folder`` copied to a fresh directory, with the run's archive and ``coevo_runs/`` removed."""
    copy = shutil.copytree(folder, tmp_path / "elsewhere" / folder.name)
    shutil.rmtree(tmp_path / "coevo_runs")
    clear_model_cache()  # nothing the run loaded stays in this process
    return copy


@pytest.fixture
def served(tmp_path):
    """Start ``langgraph dev`` in a folder: ``start(folder) -> base URL``; stopped at the end."""
    procs = []

    def start(folder: Path) -> str:
        from server_kit import free_port

        exe = shutil.which("langgraph") or str(Path(sys.executable).parent / "langgraph")
        port = free_port()
        log = open(tmp_path / "server.log", "w")
        proc = subprocess.Popen([exe, "dev", "--port", str(port), "--no-browser", "--no-reload",
                                 "--config", "langgraph.json"], cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "LANGGRAPH_NO_VERSION_CHECK": "true"}, start_new_session=True)
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 180
        while time.time() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"{base}/ok", timeout=2).status_code == 200:
                    return base
            except httpx.HTTPError:
                pass
            time.sleep(1)
        pytest.fail("langgraph dev did not start: " + (tmp_path / "server.log").read_text()[-3000:])

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_the_default_jobs_final_pair_exports_loads_elsewhere_answers_as_tested_and_is_served(tmp_path, served):
    run_id, db = run_cli(tmp_path)
    tasks, stored = final_test(db, run_id)
    folder = export(run_id, db, tmp_path / "agents" / run_id)
    manifest = read_manifest(folder)
    assert manifest.adapter == "adapter" and manifest.policy == "local:smollm2-135m"  # the trained checkpoint
    card = (folder / "README.md").read_text()
    assert "this agent (final pair)" in card and "n=3" in card and "start pair (H0, W0)" in card

    copy = moved(folder, tmp_path)
    graph = load_agent(copy)
    for task in tasks:
        out = graph.invoke({"task": task.prompt})
        want = stored[task.id]
        assert out["answer"] == want.final_answer, (task.prompt, out["answer"], want.final_answer)
        assert last_reply(out["messages"]) == last_reply(messages_from_dict(want.messages))

    from langgraph_sdk import get_sync_client

    clear_model_cache()
    client = get_sync_client(url=served(copy))
    reply = client.runs.wait(None, "agent", input={"task": tasks[0].prompt})
    assert reply["answer"] == stored[tasks[0].id].final_answer, reply
