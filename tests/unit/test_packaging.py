"""The wheel holds the whole package: setup.py's package list is setuptools' discovery of every folder of the
source tree with an ``__init__.py`` (a hand-kept list once left out ``coevo.records``, and a non-editable
install failed at ``import coevo.storage``), and every file the package reads at run time is package data.
scripts/check_wheel.sh (in .ci/run) builds and installs the real wheel; these are the quick checks."""

import fnmatch
import importlib.util
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {"tests", "benchmarks", "scripts", ".venv", "build", "docs"}


def _setup_module():
    spec = importlib.util.spec_from_file_location("coevo_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # setup() runs only as __main__
    return module


def test_the_package_list_is_every_package_folder_of_the_source_tree():
    found = {"coevo"} | {"coevo." + ".".join(p.parent.relative_to(ROOT).parts) for p in ROOT.rglob("__init__.py")
                         if p.parent != ROOT and not SKIP & set(p.relative_to(ROOT).parts)
                         and "egg-info" not in str(p)}
    assert set(_setup_module().coevo_packages()) == found
    assert "packages" not in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_a_package_folder_added_under_tests_or_scripts_does_not_ship(tmp_path, monkeypatch):
    for folder in ("tests/helpers", "scripts/tool", "envs/extra"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "envs" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert _setup_module().coevo_packages() == ["coevo", "coevo.envs", "coevo.envs.extra"]


def test_every_data_file_the_package_reads_is_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = [(package.removeprefix("coevo").lstrip(".").replace(".", "/"), pattern)
               for package, patterns in data.items() for pattern in patterns]

    def ships(path: Path) -> bool:
        rel = path.relative_to(ROOT).as_posix()
        return any(fnmatch.fnmatch(rel, f"{folder}/{pattern}".lstrip("/").replace("**/", "*"))
                   for folder, pattern in shipped)

    read_at_run_time = [*ROOT.glob("configs/**/*.toml"), *ROOT.glob("harnesses/base/*.json"), ROOT / "langgraph.json",
                        ROOT / "storage/migrations/script.py.mako"]
    assert read_at_run_time and [p for p in read_at_run_time if not ships(p)] == []


def test_bfcl_eval_installs_without_its_numpy_pin_at_the_release_coevo_scores_with():
    from coevo.envs.bfcl_import import BFCL_EVAL, BFCL_INSTALL

    setup_sh = (ROOT / "scripts" / "setup.sh").read_text()
    assert f"install --no-deps {BFCL_EVAL}\n" in setup_sh
    assert BFCL_INSTALL.endswith(BFCL_EVAL)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # the extra cannot name bfcl-eval: its numpy==1.26.4 would hold the whole environment on numpy 1
    assert not any(req.startswith("bfcl-eval") for req in project["optional-dependencies"]["bfcl"])
    assert "numpy>=2.0" in project["dependencies"]


def test_setup_sh_takes_torchs_version_from_the_cpu_constraint_file():
    setup_sh = (ROOT / "scripts" / "setup.sh").read_text()
    pins = [line for line in (ROOT / ".ci" / "constraints-cpu.txt").read_text().splitlines()
            if line.startswith("torch==")]
    assert len(pins) == 1 and "-c .ci/constraints-cpu.txt torch " in setup_sh and "torch==" not in setup_sh
