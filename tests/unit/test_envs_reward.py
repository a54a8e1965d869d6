"""Reward modes (issue 17): correctness (1/0) is the default training and gate reward, partial
credit is opted into by a config or an env ref, and every evaluation says which one it used."""

import sys
from types import SimpleNamespace

import pytest

from coevo.config import ConfigError, parse_config
from coevo.envs import registry
from coevo.records import EvaluationRecord


def test_the_default_reward_is_correctness_and_a_config_opts_in_to_partial_credit():
    default = parse_config({"env": {"ref": "reasoning_gym:size=5"}}).env
    assert default.reward == "correct" and default.settings() == {}
    job = parse_config({}).env  # the default job opts in through its ref (issue 11: chain_sum's partial room)
    assert "reward=partial" in job.ref and job.reward == "partial"
    assert registry.get_env("reasoning_gym:size=5", **default.settings()).reward_mode == "correct"
    opted = parse_config({"env": {"ref": "reasoning_gym:size=5", "reward": "partial"}}).env
    assert opted.settings() == {"reward": "partial"}
    assert registry.get_env(opted.ref, **opted.settings()).reward_mode == "partial"
    in_ref = parse_config({"env": {"ref": "reasoning_gym:size=5,reward=partial"}}).env
    assert in_ref.reward == "partial" and registry.get_env(in_ref.ref, **in_ref.settings()).reward_mode == "partial"


@pytest.mark.parametrize("env, words", [
    ({"reward": "exact"}, "env.reward"),
    ({"ref": "reasoning_gym:reward=partial", "reward": "correct"}, "keep one of them"),
    ({"ref": "reasoning_gym:reward=exact"}, "not a reward mode"),
])
def test_a_bad_or_contradictory_reward_mode_names_the_key(env, words):
    with pytest.raises(ConfigError, match=words):
        parse_config({"env": env})


def test_get_env_refuses_a_setting_the_ref_contradicts_or_the_suite_does_not_take(monkeypatch):
    with pytest.raises(ValueError, match="keep one of them"):
        registry.get_env("reasoning_gym:reward=partial", reward="correct")
    assert registry.get_env("reasoning_gym:size=5,reward=partial", reward="partial").reward_mode == "partial"

    class Plain:
        name = "plain"

        def __init__(self, k=0):
            self.k = k

    monkeypatch.setattr(registry, "entry_points",
                        lambda group: [SimpleNamespace(name="plain", value="plain_mod:Plain")])
    monkeypatch.setitem(sys.modules, "plain_mod", SimpleNamespace(Plain=Plain))
    assert registry.get_env("plain:k=2", reward=None).k == 2
    with pytest.raises(ValueError, match="takes no setting 'reward'"):
        registry.get_env("plain", reward="partial")


def test_eval_reports_the_reward_mode_it_used(tmp_path, monkeypatch):
    import typer
    from typer.testing import CliRunner

    from coevo.cli import eval as eval_cli
    from coevo.models.fake import ScriptedChatModel
    from coevo.storage import Archive

    env = registry.get_env("reasoning_gym:families=chain_sum,size=5")
    task = env.tasks("train", 1)[0]
    near_miss = f"Final answer: {env.reveal(task)}0"  # the gold plus a digit: substring credit only
    monkeypatch.setattr(eval_cli, "load_model", lambda ref: ScriptedChatModel(script=[near_miss]))
    app = typer.Typer()
    app.command("eval")(eval_cli.eval_cmd)  # a one-command app: invoked without the command name
    runner, db = CliRunner(), str(tmp_path / "e.db")
    args = ["--env", "reasoning_gym:families=chain_sum,size=5", "--harness", "reasoning_gym",
            "--model", "fake:x", "--split", "train", "--n", "1", "--db", db]

    strict = runner.invoke(app, args)
    assert strict.exit_code == 0, strict.output
    assert "correct (1/0)" in strict.output and "0.000" in strict.output
    partial = runner.invoke(app, args + ["--reward", "partial"])
    assert partial.exit_code == 0, partial.output
    assert "partial credit" in partial.output
    modes = sorted(e.aggregates["reward_mode"] for e in Archive(db).list(EvaluationRecord))
    means = sorted(e.aggregates["mean_reward"] for e in Archive(db).list(EvaluationRecord))
    assert modes == ["correct", "partial"] and means[0] == 0.0 and 0.5 < means[1] < 1.0
    clash = runner.invoke(app, ["--env", "reasoning_gym:families=chain_sum,size=5,reward=partial", *args[2:],
                                "--reward", "correct"])
    assert clash.exit_code == 1 and "keep one of them" in clash.output
