"""SQLite and PostgreSQL archives behave alike: UTC-aware timestamps (the PostgreSQL test server runs in
America/New_York), JSON columns, targeted run updates, ids, ordering and `coevo archive list/show` output."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError
from test_archive import chained_trajectory
from typer.testing import CliRunner

from coevo.cli.app import app
from coevo.envs.base import Task
from coevo.harnesses import HarnessSpec
from coevo.models.checkpoint import Checkpoint
from coevo.records import EditRecord, EvaluationRecord, GateDecision, HarnessRecord, RunRecord
from coevo.storage import Archive, ArchiveError

UTC = dt.UTC
TOKYO = dt.timezone(dt.timedelta(hours=9))


@pytest.fixture
def archive(db_url):
    with Archive(db_url) as arch:
        yield arch


def test_a_timestamp_written_with_any_offset_reads_back_as_the_same_utc_instant(archive):
    written = dt.datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=TOKYO)
    archive.put(RunRecord(id="r1", created_at=written, updated_at=written))
    archive.put(Checkpoint(id="ck", base_model="fake", created_at=written))
    for back in (archive.get(RunRecord, "r1").created_at, archive.get(RunRecord, "r1").updated_at,
                 archive.get(Checkpoint, "ck").created_at):
        assert back == written and back.utcoffset() == dt.timedelta(0)
        assert back.isoformat() == "2026-12-01T00:30:15.123456+00:00"
    before = dt.datetime.now(UTC)
    archive.put(RunRecord(id="r2"))
    assert before <= archive.get(RunRecord, "r2").created_at <= dt.datetime.now(UTC)
    with pytest.raises(ValidationError, match="timezone"):
        RunRecord(id="naive", created_at=dt.datetime(2026, 12, 1, 9, 30))


def test_json_columns_change_only_when_a_record_is_written_back(archive):
    archive.put(RunRecord(id="r1", config={"rounds": 2, "meta": {"tasks": [1, 2]}}))
    run = archive.get(RunRecord, "r1")
    run.config["meta"]["tasks"].append(3)  # in place, nested: a plain value, nothing is attached
    assert archive.get(RunRecord, "r1").config == {"rounds": 2, "meta": {"tasks": [1, 2]}}
    archive.put(run)
    assert archive.get(RunRecord, "r1").config == {"rounds": 2, "meta": {"tasks": [1, 2, 3]}}
    archive.put(EvaluationRecord(id="e1", aggregates={"per_task": {"a": [0, 1]}}))
    evaluation = archive.get(EvaluationRecord, "e1")
    evaluation.aggregates["per_task"]["a"][0] = 1
    archive.put(evaluation)
    assert archive.get(EvaluationRecord, "e1").aggregates == {"per_task": {"a": [1, 1]}}


def test_update_run_writes_only_the_named_columns(archive):
    new_year = dt.datetime(2026, 1, 1, tzinfo=UTC)
    archive.put(RunRecord(id="r1", strategy="vace", config={"rounds": 2}, created_at=new_year, updated_at=new_year))
    stale = archive.get(RunRecord, "r1")
    archive.update_run("r1", config={"rounds": 3})
    archive.update_run("r1", status="done")  # another writer's change is not overwritten by a stale copy
    run = archive.get(RunRecord, "r1")
    assert (run.status, run.config, run.strategy, run.created_at) == ("done", {"rounds": 3}, "vace", stale.created_at)
    assert run.updated_at > stale.updated_at
    with pytest.raises(ArchiveError, match="no run 'nope'"):
        archive.update_run("nope", status="done")
    with pytest.raises(ArchiveError, match=r"cannot set \['colour'\]"):
        archive.update_run("r1", colour="red")


def fill(archive: Archive) -> HarnessSpec:
    """The same rows, with the same timestamps, on any backend."""
    at = [dt.datetime(2026, 12, 1, 8, minute, tzinfo=TOKYO) for minute in range(10)]
    spec = HarnessSpec(name="h0")
    archive.put(RunRecord(id="eval-b", strategy="eval", status="done", created_at=at[1], updated_at=at[2]))
    archive.put(RunRecord(id="eval-a", strategy="eval", status="done", created_at=at[1], updated_at=at[2]))
    archive.put(HarnessRecord.of(spec, origin="base", run_id="eval-a").model_copy(update={"created_at": at[0]}))
    archive.put(Checkpoint(id="ck1", base_model="fake", parents=["ck0"], created_at=at[3]))
    archive.put(Task(id="task-1", env="toy", split="val", prompt="2+3?"))
    archive.put(EvaluationRecord(id="ev1", run_id="eval-a", harness_id=spec.id, checkpoint_id="ck1",
                                            env="toy", split="val", seeds=[0], task_ids=["task-1"], status="done",
                                            aggregates={"pass_at_k": 0.5, "mean_reward": 0.25}, created_at=at[4]))
    archive.add_trajectories([chained_trajectory("t1")], evaluation_id="ev1", run_id="eval-a")
    archive.put(EditRecord(id="eval-a-r0-cand1-v0", run_id="eval-a", parent_id=spec.id, created_at=at[5]))
    archive.put(GateDecision(id="g1", run_id="eval-a", b=0.25, c=0.5, accepted=True,
                                                 created_at=at[6]))
    return spec


def test_ids_ordering_and_the_archive_commands_print_the_same_on_both_backends(db_url, tmp_path):
    outputs = {}
    for name, target in (("sqlite", str(tmp_path / "reference.db")), ("this", db_url)):
        with Archive(target) as archive:
            spec = fill(archive)
            assert [r.id for r in archive.list(RunRecord)] == ["eval-a", "eval-b"]  # same instant: by id
            assert archive.resolve_id("harnesses", spec.id[:6]) == spec.id
        runs = []
        for args in (["list"], ["list", "checkpoints"], ["show", "ev1"], ["show", "eval-a"], ["show", "t1"],
                     ["show", "cand1"], ["show", "g1"]):
            result = CliRunner().invoke(app, ["archive", *args, "--db", target], env={"COLUMNS": "200"})
            assert result.exit_code == 0, result.output
            runs.append(result.output.replace(target, "DB"))
        outputs[name] = runs
    assert outputs["this"] == outputs["sqlite"]
    assert "2026-11-30 23:01" in outputs["sqlite"][0]  # 08:01 in Tokyo, printed in UTC
