"""`coevo eval` end to end on reasoning_gym with the real SmolLM2-135M policy (2 tasks, CPU)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from coevo.cli import archive as archive_cli
from coevo.cli import eval as eval_cli
from coevo.models.smollm2 import SmolLM2NotInstalledError, find_gguf
from coevo.records import EvaluationRecord, Trajectory
from coevo.storage import Archive

pytestmark = pytest.mark.integration

HARNESS = {"name": "rg-smoke", "prompt": {"system": "Solve the task. Reply with 'Final answer: <answer>'."},
           "parser": {"mode": "text"}, "budget": {"max_model_calls": 1, "max_output_tokens": 24},
           "decoding": {"temperature": 0.0}}


def test_coevo_eval_scores_real_tasks_and_archives_token_ids_and_logprobs(tmp_path):
    try:
        find_gguf()
    except SmolLM2NotInstalledError as err:
        pytest.skip(str(err))
    app = typer.Typer()
    app.command("eval")(eval_cli.eval_cmd)
    app.add_typer(archive_cli.app, name="archive")
    (tmp_path / "h.json").write_text(json.dumps(HARNESS))
    db = str(tmp_path / "rg.db")
    out = CliRunner().invoke(app, ["eval", "--env", "reasoning_gym:families=chain_sum,size=40", "--harness",
                                   str(tmp_path / "h.json"), "--model", "local:smollm2-135m", "--n", "2", "--db", db])
    assert out.exit_code == 0, out.output
    assert "pass@1" in out.output and "mean credit" in out.output
    archive = Archive(db)
    (evaluation,) = archive.list(EvaluationRecord)
    assert evaluation.status == "done" and evaluation.checkpoint_id == "local:smollm2-135m"
    trajs = archive.list(Trajectory, evaluation_id=evaluation.id)
    assert len(trajs) == 2 and all(t.stop_reason for t in trajs)
    for traj in trajs:
        call = traj.calls[0]
        assert call.prompt_token_ids and call.completion_token_ids
        assert len(call.logprobs) == len(call.completion_token_ids) and all(lp <= 0.0 for lp in call.logprobs)
        assert traj.segments()[0].policy_tokens == len(call.completion_token_ids)
