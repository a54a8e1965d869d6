"""One VACE round end to end with the real small model: GRPO stage, offline curator/editor,
paired validation and the gate, on a handful of the default job's showcase tasks (short replies: H0's output
budget is 12 tokens, so the round costs seconds of decoding; BFCL H0 with the real model is
``test_envs_smollm2.py``)."""

import asyncio

import pytest

from coevo.app.run import run_meta
from coevo.config import RunConfig
from coevo.records import Checkpoint, GateDecision, RunRecord, Trajectory
from coevo.storage import Archive

pytestmark = pytest.mark.integration


def test_one_round_of_vace_on_the_real_small_model_stores_a_gate_decision_and_a_checkpoint(tmp_path):
    config = RunConfig(
        rounds=1, db=str(tmp_path / "run.db"), out_dir=str(tmp_path),
        env={"n_train": 4, "n_val": 2, "n_test": 0},
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
    assert state["checkpoint"] == trained[0].id
    train_trajs = archive.list(Trajectory, run_id="it-1", split="train")
    assert any(t.calls and t.calls[0].completion_token_ids for t in train_trajs)
    assert archive.get(RunRecord, "it-1").status == "done"
