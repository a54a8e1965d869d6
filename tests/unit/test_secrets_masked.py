"""Secrets are never printed or stored (issue 29, item 2): a database password and an API key in a
model reference are masked in every message, log line, archive row, report and tracker parameter;
one stored by an older coevo is masked when read back; a masked key means "read the env var"."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sqlite3

import pytest
from test_evaluate import AdderEnv, model, spec
from test_meta_loop import setup_run
from typer.testing import CliRunner

from coevo.cli.app import app
from coevo.masking import MASK, redact, redact_data
from coevo.observe.log import ChannelHandler, attach, loop
from coevo.records import Checkpoint, RunRecord
from coevo.storage import Archive, ArchiveError

runner = CliRunner()
PASSWORD, KEY = "s3cretPW", "sk-live0123456789abcdefXYZ"
PG = f"postgresql+psycopg://alice:{PASSWORD}@127.0.0.1:1/x"


def raw_text(db) -> str:
    """Every value of every table of the SQLite file ``db``, read past coevo (no validator masks it)."""
    conn = sqlite3.connect(db)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    text = "\n".join(str(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"'))
    conn.close()
    return text


@pytest.mark.parametrize("text, shown", [
    (PG, "postgresql+psycopg://alice:***@127.0.0.1:1/x"),
    ("cannot open archive https://u:p%40ss@h/x?token=zzz: refused", "cannot open archive https://u:***@h/x?token=***: "
                                                                    "refused"),
    (f"litellm:openai/gpt-4o?api_key={KEY}&api_base=http://h:8000/v1",
     "litellm:openai/gpt-4o?api_key=***&api_base=http://h:8000/v1"),
    (f"Incorrect API key provided: {KEY}", "Incorrect API key provided: sk-***"),
    ("Authorization: Bearer abcdef123456", "Authorization: Bearer ***"),
    ("password = hunter22", "password = ***"),
])
def test_every_kind_of_secret_is_masked_and_the_rest_kept(text, shown):
    assert redact(text) == shown and redact(shown) == shown  # idempotent


@pytest.mark.parametrize("text", ["http://localhost:8000/v1", "postgresql+psycopg://coevo@db.example/coevo",
                                  "reasoning_gym:families=chain_sum,size=1000", "max_tokens=512 top_p=0.9",
                                  "sqlite:////tmp/coevo.db"])
def test_text_without_secrets_is_unchanged(text):
    assert redact(text) == text


def test_secret_named_keys_are_masked_in_nested_data():
    data = {"db": PG, "model_settings": {"api_key": KEY, "timeout_s": 30, "Token": "t0k"}, "list": [f"token={KEY}"]}
    assert redact_data(data) == {"db": "postgresql+psycopg://alice:***@127.0.0.1:1/x",
                                 "model_settings": {"api_key": MASK, "timeout_s": 30, "Token": MASK},
                                 "list": ["token=***"]}


@pytest.mark.parametrize("command", [["archive", "list"], ["archive", "show", "run-1"], ["report", "run-1"],
                                     ["archive", "gc"], ["run", "--resume", "run-1", "--no-report"]])
def test_a_database_password_is_not_printed_by_any_command(command):
    result = runner.invoke(app, [*command, "--db", PG])
    assert result.exit_code == 1, result.output
    assert PASSWORD not in result.output
    assert "alice:***@127.0.0.1" in " ".join(result.output.split()), result.output


def test_the_archive_names_an_unreachable_database_without_its_password():
    """Code that opens an archive itself (not through a command, whose output is masked as a whole)."""
    with pytest.raises(ArchiveError) as err:
        Archive(PG)
    assert PASSWORD not in str(err.value) and "alice:***@127.0.0.1" in str(err.value)


def test_a_runs_config_is_stored_without_its_secrets_and_older_rows_are_masked_on_read(tmp_path):
    db = tmp_path / "a.db"
    archive = Archive(db)
    archive.put(RunRecord(id="r1", config={"db": PG, "policy": f"litellm:openai/m?api_key={KEY}",
                                               "meta": {"model": f"openai/m?api_key={KEY}"}}))
    archive.update_run("r1", config={"db": PG, "model_settings": {"api_key": KEY}})
    archive.put(Checkpoint(id="base", base_model=f"litellm:openai/m?api_key={KEY}",
                                            config={"model_ref": f"litellm:openai/m?api_key={KEY}"}))
    archive.close()
    stored = raw_text(db)
    assert PASSWORD not in stored and KEY not in stored and "alice:***@" in stored
    # a row written by a coevo that stored secrets is masked when read back
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET config = ? WHERE id = 'r1'", (f'{{"db": "{PG}", "policy": "x?api_key={KEY}"}}',))
    conn.commit()
    conn.close()
    assert Archive(db).get(RunRecord, "r1").config == {"db": "postgresql+psycopg://alice:***@127.0.0.1:1/x",
                                                "policy": "x?api_key=***"}
    shown = runner.invoke(app, ["archive", "show", "r1", "--db", str(db)], terminal_width=200)
    assert shown.exit_code == 0 and PASSWORD not in shown.output and KEY not in shown.output


def test_a_meta_loop_run_stores_reports_and_logs_no_secret(tmp_path):
    from coevo.app.run import run_meta
    from coevo.report.html import write_report

    config, ctx, archive = setup_run(tmp_path, "help")
    config.policy = f"fake:words?api_key={KEY}"
    config.meta.model = f"openai/m?api_key={KEY}&api_base=http://h:1/v1"
    ctx = dataclasses.replace(ctx, config=config)
    lines: list[str] = []
    detach = attach(ChannelHandler(lines.append))
    try:
        loop.info(f"connecting to {PG} with {config.meta.model}", extra={"topic": "setup"})
        asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    finally:
        detach()
    page = write_report("run-1", config.db, tmp_path / "report").read_text()
    archive.close()
    for text in ("\n".join(lines), raw_text(config.db), page):
        assert KEY not in text and PASSWORD not in text
    assert "alice:***@" in lines[0] and "api_key=***" in lines[0]


def test_coevo_eval_prints_and_stores_no_key_of_its_model_reference(tmp_path, monkeypatch):
    from coevo.cli import eval as eval_cli

    monkeypatch.setattr(eval_cli, "get_env", lambda ref: AdderEnv())
    monkeypatch.setattr(eval_cli, "load_model", lambda ref, **settings: model())
    db = tmp_path / "e.db"
    harness = tmp_path / "h.json"
    harness.write_text(spec().model_dump_json())
    out = runner.invoke(app, ["eval", "--env", "adder", "--harness", str(harness), "--model",
                              f"litellm:openai/m?api_key={KEY}", "--set", f"api_key={KEY}", "--n", "2",
                              "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert KEY not in out.output and KEY not in raw_text(db)
    assert Archive(db).get(Checkpoint, "litellm:openai/m?api_key=***") is not None  # the reference names it, masked


def test_tracker_parameters_are_masked(tmp_path, monkeypatch):
    from coevo.observe import tracking

    seen = {}
    monkeypatch.setattr(tracking, "require_tracker", lambda name: None)
    monkeypatch.setattr(tracking, "MLflowTracker", lambda folder, run_id, config: seen.update(config))
    tracking.open_tracker("mlflow", tmp_path, "run-1", {"db": PG, "policy": f"litellm:m?api_key={KEY}"})
    assert seen == {"db": "postgresql+psycopg://alice:***@127.0.0.1:1/x", "policy": "litellm:m?api_key=***"}


def test_a_failures_traceback_is_printed_with_its_secrets_masked(capsys):
    from coevo.cli.common import print_failure

    try:
        raise ConnectionError(f"could not reach {PG}")
    except ConnectionError as err:
        print_failure(err)
    printed = capsys.readouterr().out
    assert "Traceback" in printed and PASSWORD not in printed and "alice:***@127.0.0.1" in printed


def test_a_masked_key_in_a_stored_reference_is_read_from_the_environment(monkeypatch):
    from coevo.models.refs import load_model, split_settings

    assert split_settings("litellm:openai/m?api_key=***&timeout_s=3") == ("litellm:openai/m", {"timeout_s": 3})
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    chat = load_model("litellm:openai/m?api_key=***")
    assert chat.api_key is None  # LiteLLM reads $OPENAI_API_KEY


def test_a_meta_roles_call_record_names_its_model_without_the_key():
    from coevo.models.refs import load_model
    from coevo.roles.llm import JsonRole

    role = JsonRole(load_model(f"litellm:openai/m?api_key={KEY}&mock_response=hi"))
    assert role.model == "litellm:openai/m" and KEY not in role.model


def test_the_log_formatter_masks_whatever_a_library_logs():
    lines: list[str] = []
    detach = attach(ChannelHandler(lines.append))
    try:
        logging.getLogger("coevo.models.router").warning("server %s failed", f"http://u:{PASSWORD}@h:8000/v1")
    finally:
        detach()
    assert lines and PASSWORD not in lines[0] and "u:***@h:8000" in lines[0]
