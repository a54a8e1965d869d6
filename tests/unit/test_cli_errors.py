"""User mistakes end in one-paragraph errors and leave no mess (issue 17, item 6), across
``coevo run``, ``eval``, ``report`` and ``archive``: model and env references checked before a run
starts; a failed run is stored as failed with its error and ``--resume`` continues it (from another
working directory too: a run's paths are stored absolute); unknown runs, missing archives and files
that are not databases; every id a run prints works with ``coevo archive show``; piped log lines
carry no source-file suffix and TRL prints no metric dicts."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from test_gate_approval import patch_services, write_config
from test_meta_loop import setup_run
from typer.testing import CliRunner

from coevo.app.run import anchored, run_meta, run_snapshot
from coevo.cli.app import app
from coevo.config import RunConfig
from coevo.models.checkpoint import new_checkpoint_id
from coevo.observe.log import ChannelHandler, attach, loop
from coevo.observe.progress import RichReporter
from coevo.records import Checkpoint, RunRecord
from coevo.storage import Archive

runner = CliRunner()


def one_paragraph_error(result, *fragments):
    """Exit 1 with an ``error:`` paragraph holding ``fragments``, and no traceback."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    text = " ".join(result.output.split())
    assert text.startswith("error:"), result.output
    for fragment in fragments:
        assert fragment in text, (fragment, text)


def test_bad_model_and_env_references_are_refused_before_a_run_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "runs" / "coevo.db"
    cases = {
        "policy=local:nonexistent": ["policy 'local:nonexistent' cannot be loaded", "local model 'nonexistent' is "
                                     "neither 'smollm2-135m' nor a checkpoint directory", "nothing was started"],
        f"policy=local:{tmp_path}+{tmp_path / 'no-adapter'}": ["is not a PEFT adapter directory"],
        "policy=litellm:hosted_vllm/served": ["needs the vLLM server's URL", "--set policy="],
        "policy=nope:x": ["unknown model scheme 'nope'"],
        "policy=litellm:openai/m?api_base=http://h:1/v1": ["strategy 'vace' trains the policy's weights",
                                                          "use a local: policy", "harness_only"],
        "env.ref=nope": ["env 'nope' cannot be built: unknown env 'nope'", "coevo envs list"],
    }
    monkeypatch.delenv("COEVO_VLLM_API_BASE", raising=False)
    for override, fragments in cases.items():
        result = runner.invoke(app, ["run", "--set", override, "--db", str(db), "--no-report"])
        one_paragraph_error(result, *fragments)
    assert not db.exists() and not (tmp_path / "coevo_runs").exists()  # nothing started, nothing written
    ev = runner.invoke(app, ["eval", "--env", "reasoning_gym:size=10", "--harness", "reasoning_gym", "--model",
                             "local:nonexistent", "--db", str(db)])
    one_paragraph_error(ev, "local model 'nonexistent'")



@pytest.mark.parametrize("env, harness, model, words", [
    ("nope", "reasoning_gym", "fake:x", "unknown env 'nope'"),
    ("reasoning_gym:size=10", "reasoning_gym", "local:nonexistent", "local model 'nonexistent'"),
    ("reasoning_gym:size=10", "no-such-harness", "fake:x", "no-such-harness"),
])
def test_coevo_eval_refused_before_it_stores_anything_leaves_no_archive_behind(tmp_path, env, harness, model, words):
    db = tmp_path / "new" / "eval.db"
    result = runner.invoke(app, ["eval", "--env", env, "--harness", harness, "--model", model, "--db", str(db)])
    assert result.exit_code == 1 and "Traceback" not in result.output and words in " ".join(result.output.split())
    assert not db.exists() and not (tmp_path / "new").exists()
    kept = tmp_path / "kept.db"  # an archive that was there before is never removed
    Archive(kept).put(RunRecord(id="r1", strategy="eval"))
    result = runner.invoke(app, ["eval", "--env", env, "--harness", harness, "--model", model, "--db", str(kept)])
    assert result.exit_code == 1 and Archive(kept).get(RunRecord, "r1") is not None

def test_a_failed_run_is_stored_failed_with_its_error_and_resume_continues_it(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help", fail_once_at=0)
    with pytest.raises(RuntimeError, match="simulated crash"):
        asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    assert archive.get(RunRecord, "run-1").status == "failed"
    snap = asyncio.run(run_snapshot(config.db, "run-1", "vace"))
    assert snap.next == ("train",) and "simulated crash in the train node" in str(snap.tasks[0].error)
    shown = runner.invoke(app, ["archive", "show", "run-1", "--db", config.db], terminal_width=200)
    assert shown.exit_code == 0 and '"status": "failed"' in shown.output
    assert "train: RuntimeError('simulated crash in the train node')" in shown.output
    state = asyncio.run(run_meta(config, run_id="run-1", resume=True, context=ctx, archive=archive))
    assert archive.get(RunRecord, "run-1").status == "done" and state["test"]["final"].score == 1.0
    assert asyncio.run(run_snapshot(config.db, "run-1", "vace")).next == ()


def test_cli_resume_of_a_failed_run_continues_it_from_another_directory(tmp_path, monkeypatch):
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir(), elsewhere.mkdir()
    config, ctx, archive = setup_run(start, "help", fail_once_at=0)
    patch_services(monkeypatch, ctx)
    (start / "h0.json").write_text(Path(config.harness).read_text())
    write_config(start, config, db="runs/coevo.db", out_dir="runs", harness="h0.json")
    monkeypatch.chdir(start)
    failed = runner.invoke(app, ["run", "run.toml", "--no-report"], terminal_width=300)
    assert failed.exit_code == 1 and "simulated crash in the train node" in failed.output
    hint = re.search(r"continue it with: (coevo run --resume (\S+) --db (\S+))", failed.output)
    assert hint, failed.output
    run_id, db = hint.group(2), hint.group(3)
    assert db == str(start / "runs" / "coevo.db")
    with Archive(db) as stored:
        assert stored.get(RunRecord, run_id).status == "failed"
        cfg = stored.get(RunRecord, run_id).config
    assert (cfg["db"], cfg["out_dir"], cfg["harness"]) == (db, str(start / "runs"), str(start / "h0.json"))

    monkeypatch.chdir(elsewhere)
    resumed = runner.invoke(app, hint.group(1).split()[1:] + ["--no-report"], terminal_width=300)
    assert resumed.exit_code == 0, resumed.output
    assert "summary" in resumed.output and list(elsewhere.iterdir()) == []
    with Archive(db) as stored:
        assert stored.get(RunRecord, run_id).status == "done"


def test_unknown_runs_missing_archives_and_non_databases_are_one_paragraph_errors(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help")
    asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    one_paragraph_error(runner.invoke(app, ["run", "--resume", "nope-123", "--db", config.db]),
                        "no run 'nope-123' in", "coevo archive list runs")
    missing = tmp_path / "missing" / "coevo.db"
    one_paragraph_error(runner.invoke(app, ["run", "--resume", "nope-123", "--db", str(missing)]),
                        f"there is no database at {missing}")
    for command in (["archive", "list"], ["archive", "show", "run-1"], ["report", "run-1"],
                    ["archive", "export", "abc", "-o", str(tmp_path / "x.json")]):
        one_paragraph_error(runner.invoke(app, command + ["--db", str(missing)]), f"no archive at {missing}")
    assert not missing.parent.exists()  # no empty database left behind
    one_paragraph_error(runner.invoke(app, ["report", "nope-123", "--db", config.db]), "no run 'nope-123'")

    not_db = tmp_path / "notes.txt"
    not_db.write_text("these are notes, not a database\n")
    for command in (["run", "--resume", "run-1"], ["run", "--set", "policy=local:nonexistent"], ["archive", "list"],
                    ["archive", "show", "run-1"], ["report", "run-1"],
                    ["eval", "--env", "reasoning_gym:size=10", "--harness", "reasoning_gym", "--model", "local:x"]):
        one_paragraph_error(runner.invoke(app, command + ["--db", str(not_db)]),
                            f"cannot open archive {not_db}: file is not a database")
    assert not_db.read_text() == "these are notes, not a database\n"


class Lines:
    """A reporter that keeps what the run prints: its bars' labels and the logging channel's lines
    (``coevo.observe.log``, formatted as the CLI prints them) until ``close``."""

    def __init__(self):
        self.lines = []
        self.close = attach(ChannelHandler(self.lines.append))

    def start(self, label, total):
        self.lines.append(label)

    def update(self, handle, done, score=None):
        pass

    def stop(self, handle):
        pass


def test_archive_show_accepts_every_id_a_run_prints(tmp_path):
    import dataclasses

    config, ctx, archive = setup_run(tmp_path, "help")
    lines = Lines()
    ctx = dataclasses.replace(ctx, reporter=lines)
    asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    lines.close()
    ckpt = new_checkpoint_id()  # the id form train_grpo/train_rsft/merge give ("ckpt-<12 hex>")
    archive.put(Checkpoint(id=ckpt, base_model="fake", run_id="run-1"))
    text = "\n".join(lines.lines)
    printed = {
        "run": "run-1",
        "W0": re.search(r"W0=(\S+)", text).group(1),
        "trained": re.search(r"\] train +round 0: \S+ -> (\S+)", text).group(1),
        "H0 prefix": re.search(r"H0=(\w+)", text).group(1),
        "candidate": re.search(r"\] check +(\S+):", text).group(1),
        "gate prefix": re.search(r"\] gate +round 0: (\w+) ACCEPTED", text).group(1),
        "ckpt": ckpt,
        "ckpt prefix": ckpt[:9],
    }
    kinds = {"run": "run", "W0": "checkpoint", "trained": "checkpoint", "H0 prefix": "harness",
             "candidate": "edit", "gate prefix": "harness", "ckpt": "checkpoint", "ckpt prefix": "checkpoint"}
    for name, id in printed.items():
        shown = runner.invoke(app, ["archive", "show", id, "--db", config.db], terminal_width=200)
        assert shown.exit_code == 0, (name, id, shown.output)
        assert shown.output.startswith(kinds[name]), (name, shown.output)
    listed = runner.invoke(app, ["archive", "list", "checkpoints", "--db", config.db], terminal_width=200)
    assert listed.exit_code == 0 and ckpt in listed.output


def test_run_paths_are_stored_absolute_and_adapters_land_under_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir()
    (tmp_path / "h0.json").write_text("{}")
    cfg = anchored(RunConfig(db="runs/coevo.db", out_dir="runs", harness="h0.json", policy="local:model+adapter"))
    assert (cfg.db, cfg.out_dir, cfg.harness) == (str(tmp_path / "runs/coevo.db"), str(tmp_path / "runs"),
                                                  str(tmp_path / "h0.json"))
    assert cfg.policy == f"local:{tmp_path / 'model'}+adapter"  # a missing adapter stays as written (and fails)
    assert anchored(RunConfig(policy="local:smollm2-135m")).policy == "local:smollm2-135m"

    import coevo.training.grpo.stage as grpo
    from coevo.harnesses.spec import HarnessSpec
    from coevo.training.stage import StageTrainer

    seen = {}

    def fake_stage(checkpoint, spec, env, tasks, config, archive=None, run_id=None):
        seen["output_dir"] = config.output_dir
        return checkpoint, []

    monkeypatch.setattr(grpo, "train_grpo", fake_stage)
    archive = Archive(":memory:")
    archive.put(Checkpoint(id="w0", base_model="x"))
    trainer = StageTrainer(RunConfig(out_dir="runs"), env=None, archive=archive, run_id="r")
    asyncio.run(trainer("w0", HarnessSpec(), [], 0))
    assert seen["output_dir"] == str(tmp_path / "runs" / "adapters")


def test_piped_log_lines_have_no_source_suffix_and_do_not_wrap():
    out = io.StringIO()
    message = "round 0: " + ", ".join(f"{i:012x}=0.500" for i in range(12))
    with RichReporter(console=Console(file=out, width=80, force_terminal=False)):
        loop.info(message, extra={"topic": "validate"})
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    assert len(lines) == 1 and re.fullmatch(r"\[\d\d:\d\d:\d\d\] validate " + re.escape(message), lines[0]), lines
    assert ".py:" not in out.getvalue()


def test_grpo_stage_prints_no_metric_dicts_and_keeps_its_metrics(tmp_path, capfd):
    from training_kit import LookupEnv, lookup_policy, tiny_llama_checkpoint

    from coevo.harnesses.spec import HarnessSpec
    from coevo.training.grpo.stage import train_grpo

    ckpt = tiny_llama_checkpoint(tmp_path / "base")
    env = LookupEnv()
    capfd.readouterr()
    new, _ = train_grpo(ckpt, HarnessSpec(parser={"mode": "python_call"}), env, env.tasks(),
                        {"steps": 1, "output_dir": str(tmp_path / "runs")},
                        policy_factory=lambda trainer: lookup_policy(right_every=2))
    printed = capfd.readouterr()
    assert "'loss'" not in printed.out and "'train_runtime'" not in printed.out, printed.out
    assert not re.search(r"\s1/1 \[", printed.err), printed.err  # no training bar (1 step) when stderr is piped
    history = new.metrics["history"]
    assert len(history) == 1 and history[0]["reward"] == 0.5 and "loss" in history[0]
    json.dumps(new.metrics)  # what the archive stores


def test_every_user_mistake_is_a_coevo_error_and_keeps_its_old_base():
    from coevo.app.run import RunError
    from coevo.config import ConfigError, StageConfigError
    from coevo.errors import CoevoError, MissingExtraError
    from coevo.harnesses.errors import HarnessError
    from coevo.models.refs import ModelRefError
    from coevo.models.smollm2 import SmolLM2NotInstalledError
    from coevo.models.trajectory import MissingTokensError
    from coevo.storage.errors import ArchiveError, SchemaVersionError

    old = {ConfigError: ValueError, StageConfigError: ValueError, RunError: ValueError, HarnessError: ValueError,
           ModelRefError: ValueError, MissingTokensError: ValueError, SmolLM2NotInstalledError: RuntimeError,
           ArchiveError: RuntimeError, SchemaVersionError: ArchiveError, MissingExtraError: ImportError}
    for cls, base in old.items():
        assert issubclass(cls, CoevoError) and issubclass(cls, base), cls


def test_the_cli_prints_any_coevo_error_as_one_paragraph_and_exits_1():
    import typer

    from coevo.cli.common import user_errors
    from coevo.errors import CoevoError

    class NewMistake(CoevoError):
        """A user mistake no CLI command names."""

    probe = typer.Typer()

    @probe.command()
    def go() -> None:
        with user_errors():
            raise NewMistake("the input [x] is wrong; write y instead")

    one_paragraph_error(CliRunner().invoke(probe, [], terminal_width=300), "the input [x] is wrong; write y instead")
