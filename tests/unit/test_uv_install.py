"""scripts/uv_install.py: pip's settings, as pip itself resolves them, handed to uv; or a refusal (exit 3) that
sends setup.sh to pip."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "uv_install.py"
spec = importlib.util.spec_from_file_location("uv_install", SCRIPT)
uv_install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uv_install)


def resolved(tmp_path: Path, global_conf: str, user_conf: str, **pip_env: str) -> dict:
    """``uv_arguments(pip_settings())`` in a process whose only pip configuration is a global file, a user file
    and ``pip_env`` (the machine's own files and ``PIP_*`` variables hidden)."""
    for name, text in (("global", global_conf), ("user", user_conf)):
        (tmp_path / name / "pip").mkdir(parents=True)
        (tmp_path / name / "pip" / "pip.conf").write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_DIRS=str(tmp_path / "global"), XDG_CONFIG_HOME=str(tmp_path / "user"),
               **pip_env)
    code = (f"import importlib.util, json; s = importlib.util.spec_from_file_location('u', {str(SCRIPT)!r}); "
            "u = importlib.util.module_from_spec(s); s.loader.exec_module(u); "
            "args, env = u.uv_arguments(u.pip_settings()); print(json.dumps([args, env]))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    args, extra = json.loads(done.stdout)
    return {"args": args, "env": extra}


def test_pips_own_precedence_decides_what_uv_is_given(tmp_path):
    out = resolved(tmp_path,
                   "[global]\nextra-index-url = file:///global\n[download]\nindex-url = file:///download-only\n",
                   "[global]\nextra-index-url = file:///user\nfind-links =\n    /wheels/a\n    /wheels/b\n"
                   "timeout = 180\n",
                   PIP_CONSTRAINT="/tmp/constraints.txt", PIP_NO_INDEX="y")
    args = out["args"]
    assert args[:2] == ["--index-strategy", "unsafe-best-match"]
    # the user file's index replaces the global one (pip: the later source wins); [download] is not pip install's
    assert "file:///user" in args and "file:///global" not in args and "file:///download-only" not in args
    assert args.count("--find-links") == 2 and "/wheels/a" in args and "/wheels/b" in args  # a multi-line value
    assert args[args.index("--constraint") + 1] == "/tmp/constraints.txt" and "--no-index" in args  # "y" is on
    assert out["env"]["UV_HTTP_TIMEOUT"] == "180"


def test_no_pip_settings_give_uv_its_defaults(tmp_path):
    assert resolved(tmp_path, "", "")["args"] == ["--index-strategy", "unsafe-best-match"]


def test_a_setting_uv_cannot_be_given_is_refused_by_name():
    with pytest.raises(ValueError, match="'only_binary'.*has no uv equivalent"):
        uv_install.uv_arguments({"find_links": ["/w"], "only_binary": {":all:"}})


def test_without_uv_it_exits_3_before_installing_anything(tmp_path):
    # a venv without uv: the script refuses, and setup.sh's install() then runs pip
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    done = subprocess.run([str(tmp_path / "v" / "bin" / "python"), str(SCRIPT), "--no-deps", "nothing-at-all"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "uv is not installed" in done.stderr, done.stderr
