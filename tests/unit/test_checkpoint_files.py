"""Checkpoints written atomically and validated when loaded (issue 29, item 10): an adapter appears
whole or not at all; a truncated weights file, an empty or broken ``adapter_config.json`` or a
missing file is refused by every loader with one paragraph naming the checkpoint and the file; the
folders of stages that never finished are listed and removed (``coevo archive gc``, and on resume)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_meta_loop import setup_run
from training_kit import random_adapter, tiny_llama_checkpoint
from typer.testing import CliRunner

from coevo.app.heartbeat import Heartbeat
from coevo.app.run import run_meta
from coevo.app.stage_folders import leftovers
from coevo.cli.app import app
from coevo.models.adapters import PARTIAL, STAGE_MARK, CheckpointError, check_adapter, stage_folder, writing_adapter
from coevo.records import Checkpoint, RunRecord
from coevo.storage import Archive

runner = CliRunner()


def words(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny Llama base and one LoRA adapter over it (a real PEFT folder)."""
    folder = tmp_path_factory.mktemp("tiny")
    base = tiny_llama_checkpoint(folder / "base")
    return base, random_adapter(base, folder / "adapter", seed=1)


def damaged(tmp_path, adapter, how):
    """A copy of ``adapter``'s folder damaged as ``how`` says; returns (folder, the file named)."""
    import shutil

    folder = tmp_path / f"ckpt-{how}"
    shutil.copytree(adapter.adapter_path, folder)
    weights, config = folder / "adapter_model.safetensors", folder / "adapter_config.json"
    if how == "truncated":
        weights.write_bytes(weights.read_bytes()[:-100])
        return folder, weights
    if how == "short":
        weights.write_bytes(weights.read_bytes()[:5])
        return folder, weights
    if how == "no_weights":
        weights.unlink()
        return folder, weights
    config.write_text({"empty": "", "not_json": "{'r': 4", "no_type": "{}"}[how])
    return folder, config


HOW = ["truncated", "short", "no_weights", "empty", "not_json", "no_type"]


@pytest.mark.parametrize("how", HOW)
def test_every_loader_refuses_a_damaged_adapter_naming_the_checkpoint_and_the_file(tmp_path, tiny, how):
    from coevo.models.refs import load_model
    from coevo.training.checkpoint import load_policy
    from coevo.training.coevo_rsi.merge import load_adapter

    base, adapter = tiny
    check_adapter(adapter.adapter_path, adapter.id)  # the whole one passes
    folder, file = damaged(tmp_path, adapter, how)
    ckpt = adapter.model_copy(update={"id": "ckpt-7", "adapter_path": str(folder)})
    for load in (lambda: check_adapter(folder, "ckpt-7"), lambda: load_policy(ckpt), lambda: load_adapter(ckpt)):
        with pytest.raises(CheckpointError, match=rf"checkpoint ckpt-7: {file}"):
            load()
    with pytest.raises(CheckpointError, match=str(file)):
        load_model(f"local:{base.base_model}+{folder}")


def test_the_policy_of_a_run_names_its_damaged_checkpoint(tmp_path, tiny):
    from coevo.app.services import PolicyCache

    base, adapter = tiny
    folder, file = damaged(tmp_path, adapter, "truncated")
    config, _, archive = setup_run(tmp_path, "help")
    config.policy = f"local:{base.base_model}"
    archive.put(Checkpoint(id="ckpt-r0", base_model=base.base_model, adapter_path=str(folder)))
    with pytest.raises(CheckpointError, match=rf"checkpoint ckpt-r0: {file} is truncated"):
        PolicyCache(config, archive)("ckpt-r0")


@pytest.mark.parametrize("how", ["truncated", "empty"])
def test_coevo_eval_of_a_damaged_adapter_is_one_paragraph_not_a_traceback(tmp_path, tiny, how):
    base, adapter = tiny
    folder, file = damaged(tmp_path, adapter, how)
    result = runner.invoke(app, ["eval", "--env", "reasoning_gym:size=4", "--harness", "reasoning_gym", "--model",
                                 f"local:{base.base_model}+{folder}", "--db", str(tmp_path / "e.db")])
    text = words(result)
    assert result.exit_code == 1 and text.startswith("error: checkpoint"), result.output
    assert str(file) in text and "Traceback" not in result.output and len(result.output.splitlines()) < 12


def test_an_adapter_appears_whole_or_not_at_all(tmp_path, tiny):
    _, adapter = tiny
    target = tmp_path / "ckpt-1" / "adapter"
    with pytest.raises(RuntimeError, match="disk unplugged"):
        with writing_adapter(target, "ckpt-1") as partial:
            (partial / "adapter_config.json").write_text(Path(adapter.adapter_path, "adapter_config.json").read_text())
            raise RuntimeError("disk unplugged")
    assert not target.exists() and list(target.parent.iterdir()) == []
    with pytest.raises(CheckpointError, match="adapter_model.safetensors is missing"):
        with writing_adapter(target, "ckpt-1") as partial:  # a save that "succeeds" but wrote no weights
            (partial / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    assert not target.exists()
    with writing_adapter(target, "ckpt-1") as partial:
        for file in Path(adapter.adapter_path).iterdir():
            (partial / file.name).write_bytes(file.read_bytes())
    check_adapter(target)
    assert sorted(p.name for p in target.parent.iterdir()) == ["adapter"]


KILLED_SAVE = """
import os, signal, sys
from pathlib import Path
from coevo.models.adapters import writing_adapter
source, target = Path(sys.argv[1]), Path(sys.argv[2])
with writing_adapter(target, "ckpt-killed") as partial:
    (partial / "adapter_config.json").write_bytes((source / "adapter_config.json").read_bytes())
    (partial / "adapter_model.safetensors").write_bytes((source / "adapter_model.safetensors").read_bytes()[:300])
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_stage_killed_while_saving_leaves_a_folder_gc_lists_and_removes(tmp_path, tiny):
    _, adapter = tiny
    out = tmp_path / "out"
    archive = Archive(tmp_path / "a.db")
    archive.put(RunRecord(id="run-dead", strategy="vace", status="failed", config={"out_dir": str(out)}))
    archive.put(RunRecord(id="run-live", strategy="vace", status="running", config={"out_dir": str(out)}))
    killed = stage_folder(out / "adapters", "ckpt-killed", "run-dead")
    proc = subprocess.run([sys.executable, "-c", KILLED_SAVE, adapter.adapter_path, str(killed / "adapter")])
    assert proc.returncode == -9 and not (killed / "adapter").exists()  # no half adapter where a loader looks
    finished = stage_folder(out / "adapters", "ckpt-done", "run-dead")  # stored, but a killed save left a partial
    (finished / "adapter").mkdir()
    (finished / f"adapter{PARTIAL}4242").mkdir()
    archive.put(Checkpoint(id="ckpt-done", base_model="b", adapter_path=str(finished / "adapter"),
                                            run_id="run-dead"))
    live = stage_folder(out / "adapters", "ckpt-live", "run-live")
    mine = tmp_path / "elsewhere" / "ckpt-foreign"  # not coevo's marker: never touched
    mine.mkdir(parents=True)
    with Heartbeat(archive, "run-live"):
        found = leftovers(archive)
        assert {(f.path, f.run_id) for f in found} == {(killed, "run-dead"), (finished / f"adapter{PARTIAL}4242",
                                                                                "run-dead")}
        listed = runner.invoke(app, ["archive", "gc", "--db", str(archive.url.removeprefix("sqlite:///"))])
        assert listed.exit_code == 0 and "2 folder(s)" in words(listed) and "to free with --delete" in words(listed)
        assert killed.exists()
        removed = runner.invoke(app, ["archive", "gc", "--delete", "--db", archive.url.removeprefix("sqlite:///")])
        assert removed.exit_code == 0 and "freed" in words(removed)
    assert not killed.exists() and not (finished / f"adapter{PARTIAL}4242").exists()
    assert (finished / "adapter").is_dir() and live.is_dir() and mine.is_dir()
    assert leftovers(archive, "run-dead") == []


def test_a_resumed_run_removes_the_folders_of_its_unfinished_stages(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help", fail_once_at=1)
    config.out_dir = str(tmp_path / "out")
    with pytest.raises(RuntimeError, match="simulated crash"):
        asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    archive.update_run("run-1", config={**archive.get(RunRecord, "run-1").config, "out_dir": config.out_dir})
    unfinished = stage_folder(Path(config.out_dir) / "adapters", "ckpt-crashed", "run-1")
    archive.put(RunRecord(id="run-2", status="failed", config={"out_dir": config.out_dir}))
    others = stage_folder(Path(config.out_dir) / "adapters", "ckpt-other", "run-2")
    asyncio.run(run_meta(config, run_id="run-1", resume=True, context=ctx, archive=archive))
    assert not unfinished.exists() and others.exists()  # only the resumed run's own
    assert json.loads((others / STAGE_MARK).read_text())["run_id"] == "run-2"


def test_a_grpo_stage_saves_its_adapter_whole_in_a_marked_folder(tmp_path):
    from training_kit import LookupEnv, lookup_policy

    from coevo.harnesses.spec import HarnessSpec
    from coevo.training.grpo.stage import train_grpo

    base = tiny_llama_checkpoint(tmp_path / "base")
    env = LookupEnv()
    new, _ = train_grpo(base, HarnessSpec(parser={"mode": "python_call"}), env, env.tasks(),
                        {"steps": 1, "output_dir": str(tmp_path / "runs")}, run_id="run-9",
                        policy_factory=lambda trainer: lookup_policy(right_every=2))
    folder = Path(new.adapter_path).parent
    assert json.loads((folder / STAGE_MARK).read_text())["run_id"] == "run-9"
    check_adapter(new.adapter_path, new.id)
    assert not [p for p in folder.iterdir() if PARTIAL in p.name]
