"""One VACE round end to end with the real small model: GRPO stage, offline curator/editor, paired validation and
the gate, on a handful of ``RunConfig``'s default tasks (reasoning_gym chain_sum; short replies: the output budget
is 12 tokens, so the round costs seconds of decoding; BFCL H0 with the real model is ``test_envs_smollm2.py``).
Then ``coevo decompose`` on the finished run: the 2×2 of its start and final harnesses under its start and final
weights (the trained LoRA adapter loaded for the W_final cells), printed by the CLI, stored and shown in the
report. (One file, one run: the round is the costly part of both.)"""

import asyncio

import pytest
from typer.testing import CliRunner

from coevo.app.run import run_meta
from coevo.cli.app import app
from coevo.config import RunConfig
from coevo.records import Checkpoint, Decomposition, EvaluationRecord, GateDecision, RunRecord, Trajectory
from coevo.storage import Archive

pytestmark = pytest.mark.integration


def test_one_round_of_vace_on_the_real_small_model_stores_a_gate_decision_and_a_checkpoint_and_decomposes(tmp_path):
    config = RunConfig(
        rounds=1, db=str(tmp_path / "run.db"), out_dir=str(tmp_path),
        env={"n_train": 4, "n_val": 2, "n_test": 3},
        train={"steps": 1, "tasks_per_step": 2, "num_generations": 2, "max_new_tokens": 12},
        meta={"candidates": 1, "min_failed_tasks": 1, "smoke_tasks": 1, "local_check": False},
    )
    state = asyncio.run(run_meta(config, run_id="it-1"))
    archive = Archive(config.db)
    decisions = archive.list(GateDecision, run_id="it-1")
    assert len(decisions) == 1
    assert decisions[0].incumbent_id == state["start_harness"] and decisions[0].pairs
    trained = [c for c in archive.list(Checkpoint, run_id="it-1") if c.adapter_path]
    assert len(trained) == 1 and trained[0].parents == [state["start_checkpoint"]]
    assert state["checkpoint"] == trained[0].id != state["start_checkpoint"]
    train_trajs = archive.list(Trajectory, run_id="it-1", split="train")
    assert any(t.calls and t.calls[0].completion_token_ids for t in train_trajs)
    assert archive.get(RunRecord, "it-1").status == "done"

    result = CliRunner().invoke(app, ["decompose", "it-1", "--db", config.db])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for row in ("H0 × W0 (start pair)", "H0 × W_final", "H_final × W0", "H_final × W_final (final pair)",
                "weight effect under H0", "harness effect under W_final", "interaction"):
        assert row in text, (row, text)
    archive = Archive(config.db)
    (record,) = archive.list(Decomposition, run_id="it-1")
    cells = {c: archive.get(EvaluationRecord, e) for c, e in record.cells.items()}
    assert {c: (e.harness_id, e.checkpoint_id) for c, e in cells.items()} == {
        "h0_w0": (state["start_harness"], state["start_checkpoint"]),
        "h0_wf": (state["start_harness"], state["checkpoint"]),
        "hf_w0": (state["incumbent"], state["start_checkpoint"]),
        "hf_wf": (state["incumbent"], state["checkpoint"])}
    assert all(len(e.aggregates["per_task"]) == 3 for e in cells.values())
    assert record.cells["hf_wf"] == state["test"]["final"].evaluation_id  # read back, not rerun
    report = CliRunner().invoke(app, ["report", "it-1", "--db", config.db])
    assert report.exit_code == 0, report.output
    assert "Which lever did what" in (tmp_path / "reports" / "it-1" / "index.html").read_text()
