"""Piped output a person can read (issue 29, item 4): with stdout not a terminal (and no COLUMNS),
tables and JSON keep every column and value whole instead of rich's 80-column cuts (``0.…``);
progress is one line per finished evaluation, written (and flushed) when it finishes, so a killed
run's log holds every line it had reached; the report shows sections only for mechanisms that ran."""

from __future__ import annotations

import asyncio
import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from test_concurrent_writers import run_files
from test_evaluate import AdderEnv, model, spec
from test_meta_loop import setup_run
from typer.testing import CliRunner

from coevo.app.run import run_meta
from coevo.cli.app import app
from coevo.cli.common import PipeConsole
from coevo.evaluation.engine import evaluate
from coevo.observe.progress import RichReporter
from coevo.records import Checkpoint, PoolMember, RunRecord
from coevo.report.html import write_report
from coevo.storage import Archive

runner = CliRunner()
FAKE_CLI = Path(__file__).parent / "fake_cli.py"
PROGRESS = re.compile(r"\[\d\d:\d\d:\d\d\] progress (A|B|eval) [0-9a-f]{12} on \w+/\w+: (\d+)/(\d+) tasks, mean "
                      r"(\d\.\d{3}|–), \d+\.\d s")


def test_tables_and_json_keep_every_column_and_value_whole_in_a_pipe(tmp_path, monkeypatch):
    from coevo.cli import eval as eval_cli

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(eval_cli, "get_env", lambda ref: AdderEnv())
    monkeypatch.setattr(eval_cli, "load_model", lambda ref, **kw: model())
    harness, db = tmp_path / "h.json", str(tmp_path / "e.db")
    long = spec("You are careful. " + "Check every digit twice before you answer. " * 6)
    harness.write_text(long.model_dump_json())
    out = runner.invoke(app, ["eval", "--env", "adder", "--harness", str(harness), "--model", "fake:x", "--k", "2",
                              "--n", "4", "--db", db])
    assert out.exit_code == 0, out.output
    assert "…" not in out.output
    row = r"mean credit +│ +0\.750 +│ +\[[01]\.\d{3}, [01]\.\d{3}\] n=4 \(bootstrap\) +│ +0\.167"
    assert re.search(row, out.output), out.output
    assert max(len(line) for line in out.output.splitlines()) > 80  # wider than the fallback: nothing was cut
    listed = runner.invoke(app, ["archive", "list", "--db", db])
    assert listed.exit_code == 0 and "…" not in listed.output and long.id[:12] in listed.output
    shown = runner.invoke(app, ["archive", "show", long.id[:12], "--db", db])
    assert shown.exit_code == 0 and long.prompt.system in shown.output  # the JSON's long line whole


def test_a_line_of_text_is_never_wrapped_in_a_pipe():
    """``coevo run`` ends with ``archive: PATH  run id: ID``: wrapped at 80 columns, a long path put the
    id on the next line, where a script reading the log for ``run id: (\\S+)`` no longer found it."""
    out = io.StringIO()
    pipe = PipeConsole(file=out)
    line = f"archive: /tmp/{'deep/' * 14}coevo.db  run id: vace-0123abcd"
    pipe.print(line)
    pipe.print("[yellow]a styled message[/yellow] " + "word " * 30)
    assert not pipe.is_terminal and out.getvalue().splitlines()[0] == line
    assert re.search(r"run id: (\S+)", out.getvalue()).group(1) == "vace-0123abcd"
    assert len(out.getvalue().splitlines()) == 2


def test_a_piped_evaluation_writes_its_progress_line_the_moment_it_finishes():
    out = io.StringIO()
    with RichReporter(console=Console(file=out, force_terminal=False)) as reporter:
        asyncio.run(evaluate(spec(), "ck", AdderEnv(), "val", n_tasks=4, model=model(), progress=reporter))
        first = out.getvalue().splitlines()
        assert len(first) == 1 and PROGRESS.fullmatch(first[0]), first  # before the reporter closes
        asyncio.run(evaluate(spec("You are sloppy."), "ck", AdderEnv(), "val", n_tasks=2, model=model(),
                             progress=reporter))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and all(PROGRESS.fullmatch(line) for line in lines), lines
    assert PROGRESS.fullmatch(lines[0]).group(2, 3, 4) == ("4", "4", "0.750")
    assert "━" not in out.getvalue()  # no bars in a pipe


def test_a_killed_runs_piped_log_holds_every_evaluation_it_finished(tmp_path):
    log = tmp_path / "run.log"
    with log.open("w") as sink:
        proc = subprocess.Popen([sys.executable, str(FAKE_CLI), "run", str(run_files(tmp_path, str(tmp_path / "k.db"))),
                                 "--no-report"], stdout=sink, stderr=subprocess.STDOUT,
                                env={k: v for k, v in {**os.environ, "OMP_NUM_THREADS": "1"}.items() if k != "COLUMNS"})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and "progress" not in log.read_text():
            time.sleep(0.1)
        proc.kill()
        proc.wait()
    text = log.read_text()
    lines = [line for line in text.splitlines() if "] progress " in line]
    assert lines, text
    assert all(PROGRESS.fullmatch(line) for line in lines), lines  # whole lines, never cut
    assert all(done == total for _, done, total, _ in (PROGRESS.fullmatch(x).groups() for x in lines))
    assert "━" not in text and "…" not in text


def test_the_report_shows_only_the_mechanisms_a_run_used(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help")
    asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    # a VACE stage reports rescue numbers of 0: rescue never ran, so no rescue section
    archive.put(Checkpoint(id="ckpt-0", base_model="fake", run_id="run-1", metrics={
        "rescue_rate": 0.0, "rescue_success": 0.0, "history": [{"step": 1, "rescue_rate": 0.0, "rescued_groups": 0}]}))
    page = write_report("run-1", config.db, tmp_path / "vace").read_text()
    assert "Complementary rescue" not in page
    assert "<h2>Gate decisions</h2>" in page and "<h2>Test</h2>" in page and "<h2>Weight stages</h2>" in page
    archive.put(PoolMember(id="p", run_id="run-1", harness_id="h", round=-1))
    assert "Complementary rescue" in write_report("run-1", config.db, tmp_path / "pool").read_text()

    (tmp_path / "rl").mkdir()
    config, ctx, archive = setup_run(tmp_path / "rl", "help", strategy="rl_only")
    asyncio.run(run_meta(config, run_id="run-2", context=ctx, archive=archive))
    page = write_report("run-2", config.db, tmp_path / "rl_only").read_text()
    assert "Gate decisions" not in page and "Complementary rescue" not in page and "<h2>Test</h2>" in page


def test_an_unfinished_run_has_no_empty_test_section(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help", fail_once_at=0)
    try:
        asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    except RuntimeError:
        pass
    page = write_report("run-1", config.db, tmp_path / "r").read_text()
    assert "<h2>Test</h2>" not in page and "<h2>Gate decisions</h2>" not in page
    assert Archive(config.db).get(RunRecord, "run-1").status == "failed"


def test_a_piped_long_evaluation_writes_lines_as_its_tasks_finish():
    out = io.StringIO()
    with RichReporter(console=Console(file=out, force_terminal=False), every_s=0.0) as reporter:
        asyncio.run(evaluate(spec(), "ck", AdderEnv(), "val", n_tasks=4, model=model(), progress=reporter))
    lines = out.getvalue().splitlines()
    assert all(PROGRESS.fullmatch(line) for line in lines), lines
    done = [int(PROGRESS.fullmatch(line).group(2)) for line in lines]
    assert done == sorted(done) and done[-1] == 4 and len(done) >= 2, done  # lines before the last, then 4/4


def test_without_every_s_a_piped_evaluation_writes_only_its_finished_line():
    out = io.StringIO()
    with RichReporter(console=Console(file=out, force_terminal=False)) as reporter:
        handle = reporter.start("eval x", 3)
        reporter.update(handle, 1, 0.5)
        reporter.update(handle, 2, 0.5)
        assert out.getvalue() == ""
        reporter.stop(handle)
    assert len(out.getvalue().splitlines()) == 1
