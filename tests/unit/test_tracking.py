"""Experiment tracking (issue 15 item 6): ``coevo run --report-to tensorboard`` writes TensorBoard
event files under the run's output folder with the weight stages' and the meta-loop's numbers; TRL's
own ``report_to`` writes a GRPO stage's steps there; a missing tracker package is a one-paragraph
error naming the extra."""

from __future__ import annotations

import builtins
import json

from test_cli_errors import one_paragraph_error, runner
from test_gate_approval import patch_services, write_config
from test_meta_loop import setup_run

from coevo.cli.app import app
from coevo.meta.budget import totals
from coevo.observe.events import read_scalars
from coevo.records import BudgetRecord, GateDecision, RunRecord
from coevo.storage import Archive


def test_run_report_to_tensorboard_writes_train_and_meta_loop_scalars(tmp_path, monkeypatch):
    config, ctx, archive = setup_run(tmp_path, "help")
    patch_services(monkeypatch, ctx)
    path = write_config(tmp_path, config, out_dir=str(tmp_path / "out"))
    result = runner.invoke(app, ["run", str(path), "--report-to", "tensorboard", "--no-report"], terminal_width=300)
    assert result.exit_code == 0, result.output
    with Archive(config.db) as stored:
        (run,) = [r for r in stored.list(RunRecord) if r.strategy == "vace"]
        budgets = stored.list(BudgetRecord, run_id=run.id)
        decisions = stored.list(GateDecision, run_id=run.id)
    folder = tmp_path / "out" / "tracking" / run.id
    assert f"tensorboard: {folder}" in " ".join(result.output.split())
    assert list((folder / "meta").glob("events.out.tfevents.*"))
    scalars = read_scalars(folder)
    # the weight stage's numbers (FakeTrainer's checkpoint metrics), one point per round
    assert [s for s, _ in scalars["train/reward_mean"]] == [0, 1]
    assert scalars["train/delta_norm"] == [(0, 0.25), (1, 0.5)]
    assert "train/effective_group_rate" in scalars
    # the meta loop: val score per harness, gate decisions, cumulative budget
    incumbent = decisions[0].incumbent_id[:12]
    assert (0, 0.0) in scalars[f"score/val/{incumbent}"]
    assert (0, 1.0) in scalars[f"score/val/{decisions[0].candidate_id[:12]}"]
    assert scalars["gate/accepted"][0] == (0, sum(d.accepted for d in decisions if d.round == 0))
    rollouts = scalars["budget/rollouts"]
    assert rollouts[-1][1] == totals(budgets)["rollouts"]  # what the run is charged: measurement apart
    assert [v for _, v in rollouts] == sorted(v for _, v in rollouts)  # cumulative
    assert (2, 1.0) in scalars[f"score/test/{decisions[0].candidate_id[:12]}"]  # the final pair, after 2 rounds


def test_a_missing_tracker_package_is_one_paragraph_naming_the_extra(tmp_path, monkeypatch):
    config, ctx, archive = setup_run(tmp_path, "help")
    patch_services(monkeypatch, ctx)
    path = write_config(tmp_path, config, out_dir=str(tmp_path / "out"))
    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("tensorboardX"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    result = runner.invoke(app, ["run", str(path), "--report-to", "tensorboard", "--no-report"], terminal_width=300)
    one_paragraph_error(result, "--report-to tensorboard needs the package 'tensorboardX'",
                        "pip install 'coevo[tracking]'", "--report-to none")
    assert not (tmp_path / "out" / "tracking").exists()
    bad = runner.invoke(app, ["run", str(path), "--report-to", "tensorbored", "--no-report"])
    one_paragraph_error(bad, "report_to", "tensorboard")


def test_grpo_stage_reports_its_steps_through_trl_to_the_run_folder(tmp_path):
    from training_kit import LookupEnv, lookup_policy, tiny_llama_checkpoint

    from coevo.config import RunConfig
    from coevo.harnesses.spec import HarnessSpec
    from coevo.training.grpo.stage import train_grpo
    from coevo.training.stage import tracked

    run = RunConfig(out_dir=str(tmp_path / "out"), report_to="tensorboard")
    stage = tracked(run.train.stage(0, 0, tmp_path / "out"), run, "run-x", 0)
    assert stage.report_to == "tensorboard"
    stage = stage.model_copy(update={"steps": 1})
    ckpt = tiny_llama_checkpoint(tmp_path / "base")
    env = LookupEnv()
    new, _ = train_grpo(ckpt, HarnessSpec(parser={"mode": "python_call"}), env, env.tasks(), stage,
                        policy_factory=lambda trainer: lookup_policy(right_every=2))
    folder = tmp_path / "out" / "tracking" / "run-x" / "trl" / "round0"
    scalars = read_scalars(folder)
    assert [s for s, _ in scalars["train/loss"]] == [1]
    rewards = [h["reward"] for h in new.metrics["history"]]
    assert [round(v, 4) for _, v in scalars["train/reward"]] == [round(r, 4) for r in rewards]
    json.dumps(new.metrics)


def test_run_report_to_mlflow_logs_the_loop_into_a_store_under_the_run_folder(tmp_path):
    import asyncio
    import os

    import pytest

    pytest.importorskip("mlflow.tracking", reason="mlflow-skinny (coevo[tracking]) is not installed")
    from mlflow.tracking import MlflowClient

    from coevo.app.run import run_meta

    config, ctx, archive = setup_run(tmp_path, "help")
    config = config.model_copy(update={"report_to": "mlflow", "out_dir": str(tmp_path / "out")})
    before = os.environ.get("MLFLOW_TRACKING_URI")
    asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    assert os.environ.get("MLFLOW_TRACKING_URI") == before  # restored when the run closed
    store = tmp_path / "out" / "tracking" / "run-1" / "mlflow.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    (run,) = client.search_runs([client.get_experiment_by_name("coevo").experiment_id])
    assert run.info.run_name == "run-1" and run.data.params["strategy"] == "vace"
    delta = [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/delta_norm")]
    assert delta == [(0, 0.25), (1, 0.5)]
    rollouts = client.get_metric_history(run.info.run_id, "budget/rollouts")
    spent = archive.list(BudgetRecord, run_id="run-1")
    assert max(m.value for m in rollouts) == totals(spent)["rollouts"]


def test_grpo_stage_reports_through_trl_into_the_runs_mlflow_store(tmp_path, monkeypatch):
    import pytest

    pytest.importorskip("mlflow.tracking", reason="mlflow-skinny (coevo[tracking]) is not installed")
    from mlflow.tracking import MlflowClient
    from training_kit import LookupEnv, lookup_policy, tiny_llama_checkpoint

    from coevo.config import RunConfig
    from coevo.harnesses.spec import HarnessSpec
    from coevo.observe.tracking import open_tracker
    from coevo.training.grpo.stage import train_grpo
    from coevo.training.stage import tracked

    monkeypatch.chdir(tmp_path)
    ckpt = tiny_llama_checkpoint(tmp_path / "base")
    run = RunConfig(out_dir=str(tmp_path / "out"), report_to="mlflow")
    tracker = open_tracker("mlflow", run.out_dir, "run-x", {})
    stage = tracked(run.train.stage(0, 0, tmp_path / "out"), run, "run-x", 0).model_copy(update={"steps": 1})
    env = LookupEnv()
    try:
        train_grpo(ckpt, HarnessSpec(parser={"mode": "python_call"}), env, env.tasks(), stage,
                   policy_factory=lambda trainer: lookup_policy(right_every=2))
    finally:
        tracker.close()
    client = MlflowClient(tracking_uri=tracker.uri)
    runs = {r.info.run_name: r for r in client.search_runs([client.get_experiment_by_name("coevo").experiment_id])}
    assert set(runs) == {"run-x", "run-x/round0"}
    assert runs["run-x/round0"].data.metrics["reward"] == 0.5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base", "out"]  # nothing written where it ran


def test_wandb_runs_offline_under_the_run_folder(tmp_path, monkeypatch):
    """wandb is not a coevo extra: a stand-in module records what the tracker asks of it."""
    import os
    import sys
    import types

    from coevo.observe.tracking import open_tracker

    calls = {}

    class Run:
        def log(self, values):
            calls.setdefault("log", []).append(values)

        def finish(self):
            calls["finished"] = True

    def init(**kwargs):
        calls["init"] = kwargs
        return Run()

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=init))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    tracker = open_tracker("wandb", tmp_path / "out", "run-w", {"strategy": "vace"})
    tracker.log({"gate/accepted": 1, "score/val/abc": float("nan"), "note": "text"}, 2)
    assert os.environ["WANDB_MODE"] == "offline"  # TRL's wandb callback stays offline too
    tracker.close()
    assert calls["init"]["mode"] == "offline" and "WANDB_MODE" not in os.environ
    assert calls["init"]["dir"] == str(tmp_path / "out" / "tracking" / "run-w")
    assert calls["init"]["name"] == "run-w" and calls["init"]["config"] == {"strategy": "vace"}
    assert calls["log"] == [{"gate/accepted": 1.0, "round": 2}] and calls["finished"]
