"""scripts/uv_install.py: pip's settings handed to uv as they are, or a refusal (exit 3) that sends setup.sh to pip."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "uv_install.py"
spec = importlib.util.spec_from_file_location("uv_install", SCRIPT)
uv_install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uv_install)

LISTING = """global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/wheels'
"""
"""What ``pip config list`` printed on the 2-core box (files and ``PIP_*`` variables)."""


def test_the_settings_that_choose_packages_become_uv_arguments_once_each():
    found = uv_install.settings(LISTING)
    assert found["extra-index-url"] == ["file:///opt/pypi/simple", "file:///opt/pypi-more/simple"]
    assert found["find-links"] == ["/opt/wheels"]  # set in a file and in the environment: given once
    assert uv_install.uv_arguments(found) == [
        "--index-strategy", "unsafe-best-match", "--constraint", "/etc/xdg/pip/constraints.txt",
        "--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels"]
    assert uv_install.uv_arguments(uv_install.settings("global.no-index='true'\n"))[-1] == "--no-index"
    assert uv_install.uv_arguments({}) == ["--index-strategy", "unsafe-best-match"]  # no pip settings: PyPI


def test_a_setting_uv_cannot_be_given_is_refused_by_name():
    with pytest.raises(ValueError, match="'only-binary' has no uv equivalent"):
        uv_install.uv_arguments(uv_install.settings(LISTING + "global.only-binary=':all:'\n"))


def test_without_uv_it_exits_3_before_installing_anything(tmp_path):
    # a fresh venv has pip but no uv: the script refuses, and setup.sh's install() then runs pip
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    done = subprocess.run([str(tmp_path / "v" / "bin" / "python"), str(SCRIPT), "--no-deps", "nothing-at-all"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "uv is not installed" in done.stderr, done.stderr
