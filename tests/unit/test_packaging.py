"""The wheel holds the whole package: every folder of the source tree with an ``__init__.py`` is listed in
pyproject's ``[tool.setuptools] packages`` (a missing one installs without it: ``coevo.records`` once did),
and every shipped config folder is package data."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {"tests", "benchmarks", "scripts", ".venv", "build", "docs"}


def test_every_package_and_config_folder_ships_in_the_wheel():
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {"coevo"} | {"coevo." + ".".join(p.parent.relative_to(ROOT).parts) for p in ROOT.rglob("__init__.py")
                         if p.parent != ROOT and not SKIP & set(p.relative_to(ROOT).parts)
                         and "egg-info" not in str(p)}
    assert found == set(setup["packages"])
    data = set(setup["package-data"]["coevo"])
    folders = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "configs").rglob("*.toml")}
    assert {f"{folder}/*.toml" for folder in folders} <= data
