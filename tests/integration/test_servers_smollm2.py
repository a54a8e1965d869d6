"""The real HTTP path: `transformers serve` (coevo[serve]) serves the bundled SmolLM2-135M on a free
local port; `coevo eval` evaluates BFCL tasks through it, and a harness-only run sends its policy
and its LLM curator and editor through it. The server returns no token ids or logprobs: the
trajectories say so and the training paths refuse them; the 135M model's malformed JSON becomes
rejected proposals with reasons, never a crash."""

from __future__ import annotations

import importlib.util

import pytest
from server_kit import TransformersServer
from typer.testing import CliRunner

from coevo.cli.app import app
from coevo.envs.registry import get_env
from coevo.harnesses import load_harness
from coevo.meta.state import Direction
from coevo.models.smollm2 import SmolLM2NotInstalledError, ensure_smollm2
from coevo.models.trajectory import MissingTokensError
from coevo.records import EditRecord, EvaluationRecord, LLMCallRecord, RunRecord, Trajectory
from coevo.roles.editor import LLMEditor
from coevo.storage import Archive
from coevo.training.grpo.samples import trajectory_rows

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("bfcl_eval")
    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        pytest.fail("transformers serve needs its serving extra: pip install 'coevo[serve]'")
    try:
        model_dir = ensure_smollm2()
    except SmolLM2NotInstalledError as err:
        pytest.skip(str(err))
    with TransformersServer(model_dir, tmp_path_factory.mktemp("serve") / "server.log") as running:
        yield running


def test_coevo_eval_through_a_real_openai_compatible_server(server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    db = str(tmp_path / "eval.db")
    harness = tmp_path / "bfcl.json"  # BFCL's H0 with one call of 24 tokens per task: the path is under test, not the
    spec = load_harness("bfcl")      # reply (H0's 2 calls of 128 tokens made this the slowest test of the suite)
    harness.write_text(spec.model_copy(update={"budget": spec.budget.model_copy(
        update={"max_model_calls": 1, "max_output_tokens": 24})}).model_dump_json())
    out = CliRunner().invoke(app, ["eval", "--env", "bfcl:categories=simple_python", "--harness", str(harness),
                                   "--model", f"litellm:openai/{server.name}", "--set", f"api_base={server.url}",
                                   "--set", "timeout_s=600", "--n", "3", "--concurrency", "2", "--db", db])
    assert out.exit_code == 0, out.output + server.log_path.read_text()[-2000:]
    assert "pass@1" in out.output and "mean credit" in out.output
    archive = Archive(db)
    (evaluation,) = archive.list(EvaluationRecord)
    assert evaluation.status == "done" and evaluation.aggregates["n_rollouts"] == 3
    trajs = archive.list(Trajectory, evaluation_id=evaluation.id)
    assert len(trajs) == 3 and not [t.stop_reason for t in trajs if t.stop_reason.startswith("error:")]
    for traj in trajs:
        call = traj.calls[0]
        assert call.output["data"]["content"] and call.output_tokens > 0 and call.input_tokens > 0
        assert call.completion_token_ids is None and call.logprobs is None
        assert "returned no token ids or logprobs" in traj.missing_tokens and server.url in traj.missing_tokens
        with pytest.raises(MissingTokensError, match="GRPO and RSFT train on the sampled tokens"):
            trajectory_rows(traj.model_copy(update={"reward": 1.0}), 1.0, 0)


def test_llm_curator_and_editor_over_http_reject_malformed_json_with_reasons(server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # 16 reply tokens: the 135M model's role replies were cut off (malformed) at 64 as they are at 16, and the path
    # under test is what happens then (a rejection with its reason, one repair, never a crash); 64 cost the four
    # role calls ~190 more decoded tokens, about 25 s on the 2-core box
    meta = f"openai/{server.name}?api_base={server.url}&max_tokens=16&timeout=600"
    policy = f"litellm:openai/{server.name}?api_base={server.url}&timeout_s=600"
    db = str(tmp_path / "run.db")
    out = CliRunner().invoke(app, [
        "run", "--strategy", "harness_only", "--meta-model", meta, "--db", db, "--no-report",
        "--set", f"policy={policy}", "--set", f"out_dir={tmp_path}",
        "--set", "rounds=1", "--set", "env.n_train=2", "--set", "env.n_val=1", "--set", "env.n_test=0",
        "--set", "meta.min_failed_tasks=1", "--set", "meta.candidates=1", "--set", "meta.smoke_tasks=0",
        "--set", "eval.concurrency=2"])
    assert out.exit_code == 0, out.output + server.log_path.read_text()[-2000:]
    archive = Archive(db)
    (run,) = archive.list(RunRecord)
    assert run.status == "done" and run.config["meta"]["model"] == meta
    curator_calls = archive.list(LLMCallRecord, run_id=run.id, role="curator")
    assert curator_calls and all(c.model == f"openai/{server.name}" and c.output_tokens > 0 for c in curator_calls)
    for edit in archive.list(EditRecord, run_id=run.id):  # a direction the 135M curator named: its edit was judged
        assert edit.status != "rejected" or edit.reason

    env = get_env("bfcl:categories=simple_python")
    task = env.tasks("train", 1)[0]
    direction = Direction(id="d0", cause="ast_decoder:decoder_failed", task_ids=[task.id],
                          description="The reply is prose, not a python-call list.")
    proposal = LLMEditor(meta, temperature=0.0).propose(direction, load_harness("bfcl"), {task.id: task})
    assert proposal.calls and all(c.role == "editor" and c.output_tokens > 0 for c in proposal.calls)
    cand = proposal.candidate
    assert cand.patch or (cand.status == "rejected" and cand.reason.startswith("editor reply rejected: "))
