"""Run configs: the built-in defaults are configs/chain_sum.toml, the default job (``coevo run`` without a
config) is configs/default.toml; every error names its key."""

from pathlib import Path

import pytest

from coevo.config import ConfigError, RunConfig, TrainConfig, load_config
from coevo.config.train import StageConfig, StageConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_the_builtin_defaults_are_the_chain_sum_job_and_the_default_job_is_the_showcase():
    from coevo.cli.run import DEFAULT_JOB

    assert load_config(ROOT / "configs" / "chain_sum.toml") == RunConfig()
    assert DEFAULT_JOB == ROOT / "configs" / "default.toml"
    job = load_config(DEFAULT_JOB)
    assert job.env.ref.startswith("showcase:") and job.env.n_val >= 100 and job.env.n_test >= 200
    assert job.strategy == "vace" and job.meta.model == "offline" and job.policy == RunConfig().policy
    assert load_config(ROOT / "configs" / "word_sorting.toml").env.ref.startswith("reasoning_gym:")


def test_errors_name_every_bad_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('rounds = 0\n[train]\nstepz = 3\n[gate]\ntest = "t-test"\n')
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    text = str(err.value)
    assert "rounds:" in text and "train.stepz:" in text and "gate.test:" in text


def test_yaml_overrides_and_missing_file(tmp_path):
    y = tmp_path / "run.yaml"
    y.write_text("strategy: harness_only\ntrain:\n  steps: 3\n")
    cfg = load_config(y, {"train.steps": 5, "meta.model": "openai/gpt-4o-mini"})
    assert (cfg.strategy, cfg.train.steps, cfg.meta.model) == ("harness_only", 5, "openai/gpt-4o-mini")
    with pytest.raises(ConfigError, match="no config file"):
        load_config(tmp_path / "nope.toml")
    (tmp_path / "broken.toml").write_text("rounds = = 2")
    with pytest.raises(ConfigError, match="does not parse"):
        load_config(tmp_path / "broken.toml")


@pytest.mark.parametrize("name, text, kind", [
    ("list.yaml", "- strategy: vace\n- rounds: 2\n", "list"),
    ("scalar.yaml", "vace\n", "str"),
    ("number.yml", "3\n", "int"),
])
def test_a_config_whose_top_level_is_not_a_mapping_is_a_one_paragraph_error(tmp_path, name, text, kind):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert f"its top level is a {kind}, but a run config is a mapping of keys" in message
    assert "configs/default.toml" in message and "\n" not in message and "Traceback" not in message
    (tmp_path / "empty.yaml").write_text("")  # an empty file is the defaults, as before
    assert load_config(tmp_path / "empty.yaml") == load_config(None)


def test_a_config_that_is_not_text_is_a_parse_error(tmp_path):
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00strategy")
    with pytest.raises(ConfigError, match="does not parse"):
        load_config(tmp_path / "binary.yaml")


def test_the_cli_prints_a_top_level_list_as_one_paragraph(tmp_path):
    from typer.testing import CliRunner

    from coevo.cli.app import app

    (tmp_path / "list.yaml").write_text("- strategy: vace\n")
    result = CliRunner().invoke(app, ["run", str(tmp_path / "list.yaml")])  # refused before anything runs
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "top level is a list" in " ".join(result.output.split())


def test_train_section_builds_each_rounds_stage_config_with_one_set_of_defaults(tmp_path):
    cfg = load_config(None, {"train.algorithm": "rsft", "train.epsilon_high": 0.3, "train.micro_batches": 4,
                             "seed": 5, "out_dir": str(tmp_path)})
    stage = cfg.train.stage(2, cfg.seed, cfg.out_dir)
    assert isinstance(stage, StageConfig) and (stage.seed, stage.output_dir) == (2005, str(tmp_path / "adapters"))
    assert (stage.epsilon_high, stage.micro_batches, stage.accumulation_steps) == (0.3, 4, 4)
    per_round = {"seed", "output_dir"}
    assert TrainConfig().stage(0, 0, "o").model_dump(exclude=per_round) == StageConfig().model_dump(exclude=per_round)
    assert StageConfig().accumulation_steps == 1  # the whole batch in one packed micro-step
    unpacked = StageConfig(pack_prefixes=False)
    assert unpacked.accumulation_steps == unpacked.tasks_per_step * unpacked.num_generations  # one row each


def test_bad_train_keys_are_errors_that_name_them():
    with pytest.raises(ConfigError) as err:
        load_config(None, {"train.lora_r": 0, "train.threshold": 0.3})
    assert "train.lora_r:" in str(err.value) and "train.threshold:" in str(err.value)
    with pytest.raises(ConfigError, match="micro_batches=3 must divide"):
        load_config(None, {"train.micro_batches": 3})
    with pytest.raises(ConfigError, match="GRPO needs num_generations >= 2"):
        load_config(None, {"train.num_generations": 1})
    assert load_config(None, {"train.algorithm": "rsft", "train.num_generations": 1}).train.num_generations == 1
    with pytest.raises(StageConfigError, match=r"learning_rate: Input should be greater than 0\n  "
                                                r"lora_rr: unknown key \(did you mean lora_r\?\)"):
        StageConfig.parse({"lora_rr": 4, "learning_rate": -1})


def test_coevo_run_with_another_env_and_no_config_starts_from_the_builtin_defaults(tmp_path, monkeypatch):
    """The showcase job's sizes and training settings are tuned to its suite: with --env (or --harness,
    or an env.* override) and no config, a run starts from RunConfig's defaults instead."""
    import coevo.cli.run as cli_run

    seen = []
    monkeypatch.setattr(cli_run, "load_config", lambda path, overrides, flags=None: seen.append(path) or 1 / 0)
    from typer.testing import CliRunner

    from coevo.cli.app import app

    job = cli_run.DEFAULT_JOB
    for args, expected in ((["run"], job), (["run", "--env", "reasoning_gym:size=10"], None),
                           (["run", "--set", "env.n_val=5"], None), (["run", "--set", "rounds=1"], job)):
        CliRunner().invoke(app, [*args, "--db", str(tmp_path / "x.db")])
        assert seen.pop() == expected, args


@pytest.mark.parametrize("overrides, words", [
    ({"strategy": "harness_s"}, "strategy harness_s with train.algorithm = \"rsft\""),
    ({"strategy": "vace", "train.rescue": True}, "train.rescue = true with train.algorithm = \"rsft\""),
])
def test_rsft_is_refused_where_it_would_silently_drop_rescue_or_routing(overrides, words):
    """Issue 39 item 5: RSFT forms no GRPO groups, so harness_s's routed rescue and ``train.rescue`` would be
    dropped; the config refuses the combination in one paragraph naming the keys and the fix."""
    with pytest.raises(ConfigError) as err:
        load_config(None, {**overrides, "train.algorithm": "rsft"})
    message = " ".join(str(err.value).split())
    assert words in message and "set train.algorithm = \"grpo\"" in message and "Traceback" not in message
    # GRPO keeps them; RSFT without rescue runs; a strategy whose row picks RSFT (WHALE) is not the config's choice
    assert load_config(None, {**overrides, "train.algorithm": "grpo"}).train.algorithm == "grpo"
    assert load_config(None, {"strategy": "vace", "train.algorithm": "rsft"}).train.algorithm == "rsft"
    assert load_config(None, {"strategy": "whale", "train.rescue": True}).train.algorithm == "rsft"


def test_evoharness_rl_needs_its_lambda_set_and_an_explicit_zero_runs():
    """Issue 39 item 5: unset, ``train.action_cost`` would train EvoHarness-RL on the task reward alone (not
    cost-aware); its paper gives no lambda, so the strategy refuses to run without one."""
    with pytest.raises(ConfigError) as err:
        load_config(None, {"strategy": "evoharness_rl"})
    assert "needs train.action_cost" in " ".join(str(err.value).split())
    assert load_config(None, {"strategy": "evoharness_rl", "train.action_cost": 0.5}).train.action_cost == 0.5
    assert load_config(None, {"strategy": "evoharness_rl", "train.action_cost": 0}).train.action_cost == 0
    assert load_config(None).train.action_cost is None  # other strategies: no cost
    # a comparison's per-strategy config (a dump of the base config, re-validated) is refused the same way
    data = {**load_config(None).model_dump(mode="json"), "strategy": "evoharness_rl"}
    with pytest.raises(ValueError, match="needs train.action_cost"):
        RunConfig.model_validate(data)
