"""Run configs: the shipped default equals the built-in defaults; every error names its key."""

from pathlib import Path

import pytest

from coevo.config import ConfigError, RunConfig, load_config

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_default_config_is_the_builtin_default():
    assert load_config(ROOT / "configs" / "default.toml") == RunConfig()
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
