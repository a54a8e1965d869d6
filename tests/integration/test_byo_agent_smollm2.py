"""The README's bring-your-own-agent example end to end with the real small model (issue 28): the
LangGraph ReAct agent of ``coevo.examples.react_agent`` co-evolved through ``coevo run --harness`` on
reasoning-gym chain_sum at a tiny budget (a GRPO stage on the agent's own rollouts, an edit of its
params, the gate), then its params exported and loaded back into the app."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from coevo import load_params
from coevo.cli.app import app
from coevo.examples.react_agent import ReactParams, make_agent
from coevo.models.refs import load_model
from coevo.records import Checkpoint, GateDecision, HarnessRecord, RunRecord, Trajectory
from coevo.storage import Archive

pytestmark = pytest.mark.integration

ENV = "reasoning_gym:families=chain_sum,size=40,seed=0,chain_sum.max_terms=2,chain_sum.max_digits=1,reward=partial"


def test_the_readme_react_agent_is_co_evolved_offline_and_its_params_load_back(tmp_path: Path):
    db = tmp_path / "run.db"
    result = CliRunner().invoke(app, [
        "run", "--harness", "coevo.examples.react_agent:make_agent", "--db", str(db), "--no-report",
        "--set", "rounds=1", "--set", f"out_dir={tmp_path}", "--set", f"env.ref={ENV}",
        "--set", "env.n_train=4", "--set", "env.n_val=3", "--set", "env.n_test=2",
        "--set", "train.steps=1", "--set", "train.tasks_per_step=2", "--set", "train.num_generations=2",
        "--set", "train.max_new_tokens=48", "--set", "meta.min_failed_tasks=1", "--set", "meta.smoke_tasks=1"])
    assert result.exit_code == 0, result.output
    archive = Archive(str(db))
    (run,) = archive.list(RunRecord)
    assert run.status == "done" and run.config["harness"] == "coevo.examples.react_agent:make_agent"
    harnesses = archive.list(HarnessRecord, run_id=run.id)
    assert all(h.spec["agent"] == "coevo.examples.react_agent:make_agent" for h in harnesses)
    assert {h.origin for h in harnesses} >= {"base", "edit"}  # the editor changed the agent's params
    assert len(archive.list(GateDecision, run_id=run.id)) == 1
    assert [c for c in archive.list(Checkpoint, run_id=run.id) if c.adapter_path]  # the model the agent got, trained

    train = [t for t in archive.list(Trajectory, run_id=run.id, split="train") if t.calls]
    assert train and all(c.completion_token_ids and c.logprobs for t in train for c in t.calls)
    for t in train:  # the loss covers exactly the model's sampled tokens: prompts and observations are masked
        sampled = [tok for c in t.calls for tok in c.completion_token_ids]
        policy = [tok for s in t.segments() for tok, m in zip(s.input_ids, s.loss_mask) if m]
        assert policy == sampled

    out = tmp_path / "evolved.json"
    final = archive.list(HarnessRecord, run_id=run.id)[-1].id
    exported = CliRunner().invoke(app, ["archive", "export", final[:12], "-o", str(out), "--db", str(db)])
    assert exported.exit_code == 0, exported.output
    params = load_params(out, ReactParams)  # the README's three lines
    agent = make_agent(params, load_model("local:smollm2-135m").model_copy(update={"max_tokens": 24}))
    state = agent.invoke({"messages": [("user", "What is 2 + 3?")]})
    assert state["messages"][-1].type == "ai" and params.prompt.system
