"""``coevo decompose`` on the real small model at a tiny size: a one-round VACE run, then the 2×2 of its
start and final harnesses under its start and final weights (the trained LoRA adapter loaded for the
W_final cells), printed by the CLI, stored and shown in the report."""

import asyncio

import pytest
from typer.testing import CliRunner

from coevo.app.run import run_meta
from coevo.cli.app import app
from coevo.config import RunConfig
from coevo.records import Checkpoint, Decomposition, EvaluationRecord
from coevo.storage import Archive

pytestmark = pytest.mark.integration


def test_decompose_a_finished_run_on_the_real_small_model(tmp_path):
    config = RunConfig(
        rounds=1, db=str(tmp_path / "run.db"), out_dir=str(tmp_path),
        env={"ref": "reasoning_gym:families=chain_sum,size=60,seed=0,chain_sum.max_terms=2,chain_sum.max_digits=1",
             "n_train": 2, "n_val": 2, "n_test": 3},
        train={"steps": 1, "tasks_per_step": 2, "num_generations": 2, "max_new_tokens": 16},
        meta={"candidates": 1, "smoke_tasks": 1, "local_check": False},
    )
    state = asyncio.run(run_meta(config, run_id="dec-1"))
    trained = Archive(config.db).get(Checkpoint, state["checkpoint"])
    assert trained.adapter_path and state["checkpoint"] != state["start_checkpoint"]
    result = CliRunner().invoke(app, ["decompose", "dec-1", "--db", config.db])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for row in ("H0 × W0 (start pair)", "H0 × W_final", "H_final × W0", "H_final × W_final (final pair)",
                "weight effect under H0", "harness effect under W_final", "interaction"):
        assert row in text, (row, text)
    archive = Archive(config.db)
    (record,) = archive.list(Decomposition, run_id="dec-1")
    cells = {c: archive.get(EvaluationRecord, e) for c, e in record.cells.items()}
    assert {c: (e.harness_id, e.checkpoint_id) for c, e in cells.items()} == {
        "h0_w0": (state["start_harness"], state["start_checkpoint"]),
        "h0_wf": (state["start_harness"], state["checkpoint"]),
        "hf_w0": (state["incumbent"], state["start_checkpoint"]),
        "hf_wf": (state["incumbent"], state["checkpoint"])}
    assert all(len(e.aggregates["per_task"]) == 3 for e in cells.values())
    assert record.cells["hf_wf"] == state["test"]["final"].evaluation_id  # read back, not rerun
    report = CliRunner().invoke(app, ["report", "dec-1", "--db", config.db])
    assert report.exit_code == 0, report.output
    assert "Which lever did what" in (tmp_path / "reports" / "dec-1" / "index.html").read_text()
