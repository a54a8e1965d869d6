"""Shipped configs are found from any directory (``coevo.config.shipped``): ``configs/...`` names the file in
the directory you run from when there is one, else the copy inside the package, so an installed wheel runs
``coevo run configs/papers/vace.toml`` and a table config inherits its shipped preset and suite."""

import pytest

from coevo.app.tables import load_table
from coevo.config import ConfigError, load_config
from coevo.config.shipped import PACKAGE_ROOT, config_path


def test_a_shipped_config_loads_from_a_directory_without_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert config_path("configs/papers/vace.toml") == PACKAGE_ROOT / "configs" / "papers" / "vace.toml"
    assert load_config("configs/papers/vace.toml").strategy == "vace"
    spec, config = load_table("configs/tables/whale.toml")
    assert spec.preset == "configs/papers/whale.toml" and config.env.ref.startswith("showcase:")  # the suite's


def test_a_file_of_that_name_in_the_working_directory_comes_first(tmp_path, monkeypatch):
    (tmp_path / "configs" / "papers").mkdir(parents=True)
    (tmp_path / "configs" / "papers" / "vace.toml").write_text('strategy = "rl_only"\n')
    monkeypatch.chdir(tmp_path)
    assert load_config("configs/papers/vace.toml").strategy == "rl_only"


def test_a_config_neither_here_nor_shipped_is_refused_with_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="configs/papers/nope.toml"):
        load_config("configs/papers/nope.toml")
