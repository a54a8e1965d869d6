"""Honest small comparisons and clear errors (issue 29, item 9): ``coevo compare`` warns when its test
split, its proposals or its seeds cannot separate strategies at its 95 % intervals; an error about
``--strategy`` (or ``--strategies``, ``--set``) names the flag; an unknown config key gets "did you
mean"; a write to a full archive ends in one paragraph with the run marked failed and resumable."""

from __future__ import annotations

import asyncio
import errno
import sqlite3
from types import SimpleNamespace

import pytest
from sqlalchemy import event
from test_compare import services
from test_evaluate import AdderEnv, model, spec
from test_meta_loop import setup_run
from typer.testing import CliRunner

from coevo.app.compare import compare
from coevo.app.run import run_meta
from coevo.cli.app import app
from coevo.config import ConfigError, StageConfig, StageConfigError, load_config
from coevo.envs.base import Task
from coevo.evaluation.stats import Estimate
from coevo.records import RunRecord, Trajectory
from coevo.report.caveats import separation_warnings
from coevo.report.compare import write_compare_report
from coevo.report.power import separable_difference, tasks_needed
from coevo.storage import Archive, ArchiveFullError
from coevo.storage import archive as archive_module
from coevo.storage.errors import disk_full

runner = CliRunner()


def words(result) -> str:
    return " ".join(result.output.split())


# --- comparisons that cannot separate their strategies ---------------------------------------------


def test_the_smallest_separable_difference_follows_the_bootstrap_best_case():
    assert separable_difference(10) == pytest.approx(0.308, abs=1e-3)
    assert separable_difference(40) == pytest.approx(0.088, abs=1e-3)
    assert separable_difference(0) == 1.0
    n = tasks_needed(0.10)
    assert separable_difference(n) <= 0.10 < separable_difference(n - 1)


def _row(strategy, seeds, diff=None, accepted=0, rejected=0):
    est = Estimate(mean=0.5, low=0.2, high=0.8, n=10)
    return SimpleNamespace(strategy=strategy, seeds=seeds, score=est, start=est, vs_reference=diff, gated=True,
                           accepted=accepted, rejected=rejected)


def test_a_one_proposal_ten_task_one_seed_comparison_is_warned_about():
    tie = Estimate(mean=0.1, low=-0.25, high=0.45, n=10, method="bootstrap")
    small = SimpleNamespace(id="c", reference="vace", n_test=10, rows=[
        _row("vace", [0], accepted=1), _row("harness_only", [0], tie, rejected=1), _row("rl_only", [0], tie)])
    found = separation_warnings(small)
    assert len(found) == 4, found
    assert found[0].startswith("10 test tasks: no paired difference below 0.31") and "env.n_test" in found[0]
    assert "±0.35 wide (median), wider than any difference measured (0.10" in found[1]
    assert "at most 1 harness proposal per run reached a gate (vace, harness_only)" in found[2]
    assert found[3].startswith("one seed per strategy")
    clear = Estimate(mean=0.4, low=0.3, high=0.5, n=60, method="bootstrap")
    big = SimpleNamespace(id="c", reference="vace", n_test=60, rows=[
        _row("vace", [0, 1, 2], accepted=4, rejected=2), _row("rl_only", [0, 1, 2], clear)])
    assert separation_warnings(big) == []


def test_compare_prints_and_reports_the_warnings_of_a_small_comparison(tmp_path, monkeypatch):
    config, _, archive = setup_run(tmp_path)
    config.rounds = 1
    context_for, _ = services(archive)
    result = asyncio.run(compare(config, ["vace", "rl_only"], 1, archive=archive, context_for=context_for))
    found = separation_warnings(result)
    assert any(w.startswith("4 test tasks") for w in found) and any("one seed" in w for w in found)
    page = write_compare_report(result, tmp_path / "cmp").read_text()
    assert all(f"<b>warning:</b> {w.split(':')[0]}" in page for w in found)
    from coevo.app import compare as compare_module

    async def same(*args, **kwargs):
        return result

    monkeypatch.setattr(compare_module, "compare", same)
    printed = runner.invoke(app, ["compare", "--strategies", "vace,rl_only", "--seeds", "1", "--db", config.db,
                                  "-o", str(tmp_path / "cli")])
    assert printed.exit_code == 0, printed.output
    assert words(printed).count("warning:") == len(found) and "4 test tasks" in words(printed)


# --- errors that name the flag; did you mean ---------------------------------------------------------


def test_a_bad_strategy_is_reported_against_its_flag_not_the_defaults(tmp_path):
    result = runner.invoke(app, ["run", "--strategy", "nope", "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 1 and words(result).startswith("error: --strategy nope is invalid: strategy: unknown "
                                                              "strategy 'nope'"), result.output
    assert "defaults" not in result.output
    typo = runner.invoke(app, ["run", "--strategy", "vaec", "--db", str(tmp_path / "x.db")])
    assert "(did you mean vace?)" in words(typo)
    many = runner.invoke(app, ["compare", "--strategies", "vace,nope", "--db", str(tmp_path / "x.db")])
    assert many.exit_code == 1 and "--strategies vace,nope: unknown strategy 'nope'" in words(many)
    assert not (tmp_path / "x.db").exists()


def test_an_unknown_config_key_gets_the_key_likely_meant(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(None, {"train.stepz": 3, "roundz": 2, "gate.min_marign": 0.1, "trian.steps": 1})
    text = str(err.value)
    head = text.splitlines()[0]
    assert head.endswith(" are invalid:") and "defaults" not in head, head
    assert all(flag in head for flag in ("--set train.stepz=3", "--set roundz=2", "--set gate.min_marign=0.1",
                                         "--set trian.steps=1")), head
    for line in ("train.stepz: unknown key (did you mean train.steps?)", "roundz: unknown key (did you mean rounds?)",
                 "gate.min_marign: unknown key (did you mean gate.min_margin?)",
                 "trian: unknown key (did you mean train?)"):
        assert line in text, text
    path = tmp_path / "c.toml"
    path.write_text("[meta]\ncandiates = 3\n")
    with pytest.raises(ConfigError, match=r"c\.toml is invalid:\n  meta\.candiates: unknown key \(did you mean "
                                          r"meta\.candidates\?\)"):
        load_config(path)
    with pytest.raises(StageConfigError, match=r"learning_rat: unknown key \(did you mean learning_rate\?\)"):
        StageConfig.parse({"learning_rat": 1e-5})


# --- a full disk ------------------------------------------------------------------------------------------


def cap_pages(monkeypatch, pages: int) -> None:
    """Every archive opened from now on gets a SQLite page cap: writes past it fail as on a full disk."""
    made = archive_module.make_engine

    def capped(url):
        engine = made(url)
        event.listen(engine, "connect", lambda conn, _: conn.execute(f"PRAGMA max_page_count={pages}"))
        return engine

    monkeypatch.setattr(archive_module, "make_engine", capped)


def test_a_full_archive_refuses_a_write_whole_with_a_clear_error(tmp_path, monkeypatch):
    Archive(tmp_path / "a.db").close()
    cap_pages(monkeypatch, 48)
    archive = Archive(tmp_path / "a.db")
    archive.put(RunRecord(id="small"))
    tasks = [Task(id=f"t{i}", env="adder", split="val", prompt="y" * 2000) for i in range(200)]
    with pytest.raises(ArchiveFullError, match=r"the archive at sqlite:///.*a\.db is full: the disk \(or quota\) "
                                               r"has no room for 200 row\(s\) of tasks, so nothing of that write"):
        archive.put(*tasks)
    assert archive.get(Task, "t0") is None and [r.id for r in archive.list(RunRecord)] == ["small"]  # all or nothing


def test_disk_full_is_recognised_on_every_backend():
    assert disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert disk_full(sqlite3.OperationalError("database or disk is full"))
    assert disk_full(type("DiskFull", (Exception,), {"sqlstate": "53100"})())  # PostgreSQL's disk_full
    assert not disk_full(RuntimeError("something else")) and not disk_full(OSError(errno.EACCES, "denied"))
    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.Error as inner:
            raise RuntimeError("a library's wrapper") from inner
    except RuntimeError as outer:
        assert disk_full(outer)


def test_coevo_eval_on_a_full_disk_fails_in_one_paragraph_and_resumes_once_there_is_room(tmp_path, monkeypatch):
    from coevo.cli import eval as eval_cli

    monkeypatch.setattr(eval_cli, "get_env", lambda ref: AdderEnv(size=40))
    monkeypatch.setattr(eval_cli, "load_model", lambda ref, **kw: model(latency_s=0.002))  # tasks finish one by one
    db, harness = str(tmp_path / "e.db"), tmp_path / "h.json"
    harness.write_text(spec().model_dump_json())
    Archive(db).close()
    args = ["eval", "--env", "adder", "--harness", str(harness), "--model", "fake:x", "--k", "4", "--concurrency", "4",
            "--db", db]
    with monkeypatch.context() as patched:
        cap_pages(patched, 150)
        full = runner.invoke(app, args)
    text = words(full)
    assert full.exit_code == 1 and "Traceback" not in full.output, full.output
    run_id = full.output.split()[1].rstrip(":")
    assert "is full: the disk (or quota) has no room for" in text and f"--run-id {run_id}" in text
    archive = Archive(db)
    assert archive.get(RunRecord, run_id).status == "failed"
    kept = archive.count(Trajectory)
    assert 0 < kept < 160 and kept % 4 == 0  # whole tasks only
    resumed = runner.invoke(app, [*args, "--run-id", run_id])
    assert resumed.exit_code == 0 and f"{kept // 4} tasks resumed" in words(resumed), resumed.output
    assert archive.count(Trajectory) == 160 and archive.get(RunRecord, run_id).status == "done"


def test_a_run_that_hits_a_full_disk_is_marked_failed_and_resumes_to_the_same_result(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    config, ctx, archive = setup_run(tmp_path / "a", "help")
    reference = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    config, ctx, archive = setup_run(tmp_path / "b", "help")
    writes = {"n": 0}
    real = archive.add_trajectories

    def filling(*args, **kwargs):
        writes["n"] += 1
        if writes["n"] == 6:
            raise ArchiveFullError(archive.url, "4 row(s) of trajectories")  # as Archive._transaction raises it
        return real(*args, **kwargs)

    monkeypatch.setattr(archive, "add_trajectories", filling)
    with pytest.raises(ArchiveFullError, match=r"Free space on that disk, then resume: coevo run --resume run-1 "):
        asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    assert archive.get(RunRecord, "run-1").status == "failed"
    state = asyncio.run(run_meta(config, run_id="run-1", resume=True, context=ctx, archive=archive))
    assert archive.get(RunRecord, "run-1").status == "done"
    assert state["incumbent"] == reference["incumbent"]
    assert state["test"]["final"].score == reference["test"]["final"].score


def test_a_full_disk_under_concurrent_tasks_leaves_no_unretrieved_write_behind(tmp_path):
    """Tasks that finish while a write is failing queue their own group commit; once the evaluation is
    cancelled, each of those writes fails too and must be read, not printed by asyncio as "Task exception
    was never retrieved" (a traceback before the one-paragraph error)."""
    import gc
    import time

    from coevo.evaluation.engine import evaluate

    archive = Archive(tmp_path / "a.db")
    writes = []

    def full(batch, *args, **kwargs):
        writes.append(len(batch))
        time.sleep(0.05)  # the other tasks finish and queue their writes meanwhile
        raise ArchiveFullError(archive.url, f"{len(batch)} row(s) of trajectories")

    archive.add_trajectories = full
    unretrieved = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unretrieved.append(context))
        with pytest.raises(ArchiveFullError):
            await evaluate(spec(), "ck", AdderEnv(size=20), "val", model=model(latency_s=0.01), archive=archive,
                           concurrency=8)
        gc.collect()  # a task whose exception nobody read reports it when collected

    asyncio.run(main())
    assert len(writes) >= 2, writes  # a queued write ran after the first one failed
    assert [c["message"] for c in unretrieved] == []


def test_a_new_archive_on_a_full_disk_says_the_disk_is_full_not_that_the_path_is_bad(tmp_path, monkeypatch):
    cap_pages(monkeypatch, 4)  # too few pages for the tables
    with pytest.raises(ArchiveFullError, match=r"is full: the disk \(or quota\) has no room for the archive's tables.*"
                                               r"then resume: the same command; nothing was started"):
        Archive(tmp_path / "new.db")
