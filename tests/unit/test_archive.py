"""The archive: round trips, idempotent upserts, schema-version guard, all-or-nothing batches."""

from __future__ import annotations

import datetime as dt
import math
import sqlite3

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, messages_to_dict

from coevo.envs.base import Task
from coevo.harnesses import HarnessSpec
from coevo.meta.search import Plan
from coevo.models.base import TOKENS_KEY, record_call
from coevo.models.checkpoint import Checkpoint
from coevo.models.fake import char_tokens, fake_template
from coevo.models.trajectory import Trajectory
from coevo.records import (
    Ballot,
    BaseChoice,
    BudgetRecord,
    Decomposition,
    EditRecord,
    EvaluationRecord,
    ExperienceRecord,
    ExportRecord,
    GateDecision,
    GatePair,
    HarnessRecord,
    LLMCallRecord,
    ModelProposal,
    PairScore,
    Phase,
    PoolMember,
    Profile,
    ProfileEntry,
    Promotion,
    RunHarness,
    RunHeartbeat,
    RunRecord,
)
from coevo.storage import SCHEMA_VERSION, Archive, ArchiveError, SchemaVersionError, codec
from coevo.storage.migrate import head
from coevo.storage.tables import TABLES, scalar_fields

# The record tables as coevo created them before their columns were derived from ``Trajectory`` and
# ``Checkpoint`` (commit f5977ef, SQLite): archives written then must open and read the same.
OLD_RECORD_DDL = {
    "CREATE TABLE policy_checkpoints (\n\tid VARCHAR NOT NULL, \n\tbase_model VARCHAR NOT NULL, \n\tadapter_path "
    "VARCHAR, \n\tparents JSON NOT NULL, \n\tconfig JSON NOT NULL, \n\tmetrics JSON NOT NULL, \n\trun_id VARCHAR, "
    "\n\tcreated_at FLOAT NOT NULL, \n\tPRIMARY KEY (id)\n)",
    "CREATE INDEX ix_policy_checkpoints_run_id ON policy_checkpoints (run_id)",
    "CREATE TABLE trajectories (\n\tid VARCHAR NOT NULL, \n\tevaluation_id VARCHAR, \n\trun_id VARCHAR, \n\ttask_id "
    "VARCHAR NOT NULL, \n\tenv VARCHAR NOT NULL, \n\tsplit VARCHAR NOT NULL, \n\tharness_id VARCHAR NOT NULL, "
    "\n\tcheckpoint_id VARCHAR NOT NULL, \n\tseed INTEGER NOT NULL, \n\tfinal_answer VARCHAR, \n\tstop_reason "
    "VARCHAR NOT NULL, \n\tinterface_violations INTEGER NOT NULL, \n\tmodel_turns INTEGER NOT NULL, \n\tenv_actions "
    "INTEGER NOT NULL, \n\treward FLOAT NOT NULL, \n\tpassed BOOLEAN NOT NULL, \n\tlatency_s FLOAT NOT NULL, "
    "\n\tinput_tokens INTEGER NOT NULL, \n\toutput_tokens INTEGER NOT NULL, \n\tcost_usd FLOAT NOT NULL, \n\tbody "
    "TEXT NOT NULL, \n\tcreated_at FLOAT NOT NULL, \n\tPRIMARY KEY (id)\n)",
    "CREATE INDEX ix_trajectories_evaluation_id ON trajectories (evaluation_id)",
    "CREATE INDEX ix_trajectories_harness_id ON trajectories (harness_id)",
    "CREATE INDEX ix_trajectories_run_id ON trajectories (run_id)",
    "CREATE INDEX ix_trajectories_task_id ON trajectories (task_id)",
}
OLD_TRAJECTORY_COLUMNS = ("id", "evaluation_id", "run_id", "task_id", "env", "split", "harness_id", "checkpoint_id",
                          "seed", "final_answer", "stop_reason", "interface_violations", "model_turns", "env_actions",
                          "reward", "passed", "latency_s", "input_tokens", "output_tokens", "cost_usd", "body",
                          "created_at")


def chained_trajectory(id: str = "t1", turns: int = 4, task_id: str = "task-1") -> Trajectory:
    """A tool-using rollout whose calls form a prefix chain, with fake token ids and logprobs."""
    msgs = [SystemMessage("Use the tools."), HumanMessage("Add 2 and 3.")]
    calls = []
    for t in range(turns):
        text = f"calling add, turn {t}"
        reply = AIMessage(text, tool_calls=[{"name": "add", "args": {"a": 2, "b": t}, "id": f"c{t}"}])
        completion = char_tokens(text)
        reply.response_metadata[TOKENS_KEY] = {"prompt_token_ids": char_tokens(fake_template(msgs)),
                                               "completion_token_ids": completion,
                                               "logprobs": [-0.25 - 0.01 * i for i in range(len(completion))]}
        calls.append(record_call(msgs, reply, latency_s=0.05))
        msgs = msgs + [reply, ToolMessage(str(2 + t), tool_call_id=f"c{t}")]
    return Trajectory(id=id, task_id=task_id, env="toy", split="val", harness_id="h" * 64, checkpoint_id="ck",
                      seed=3, messages=messages_to_dict(msgs), calls=calls, final_answer="5",
                      stop_reason="final_answer", hook_events=[{"event": "after_tool", "hook": "warn"}],
                      interface_violations=1, model_turns=turns, env_actions=turns, reward=0.75, passed=True,
                      score_detail={"expected_type": "int"}, latency_s=0.2)


def samples() -> list:
    """One record of every kind the archive stores, every field set (nested models, None and UTC times included)."""
    pair = PairScore(harness_id="h", checkpoint_id="ck1", val=0.5, timr=0.25)
    return [
        RunRecord(id="r1", strategy="vace", config={"rounds": 3}, status="done"),
        RunHeartbeat(id="r1", host="node0", pid=4242),
        HarnessRecord(id="h", spec={"name": "h"}, parents=["h0"], origin="edit", run_id="r1"),
        EditRecord(id="e1", run_id="r1", round=1, parent_id="p", child_id="c", direction="format",
                   patch=[{"op": "replace", "path": "/name", "value": "y"}], rationale="why", status="checked"),
        Checkpoint(id="ck1", base_model="local:smollm2-135m", adapter_path="/a", parents=["ck0"], config={"lr": 1e-5},
                   metrics={"loss": 0.5}, run_id="r1", model_ref="litellm:hosted_vllm/ck1", vllm=["http://gpu0:8000"]),
        Task(id="q1", env="toy", split="val", prompt="2+3?", metadata={"family": "add"}),
        EvaluationRecord(id="ev1", run_id="r1", harness_id="h", checkpoint_id="ck1", env="toy", split="val",
                         seeds=[0, 1], k=2, task_ids=["q1"], aggregates={"pass_at_k": 0.5}, status="done"),
        chained_trajectory("t1"),
        GateDecision(id="g1", run_id="r1", round=2, incumbent_id="h0", candidate_id="h", b=0.4, c=0.6,
                     accepted=True, reason="c > b",
                     pairs=[GatePair(task_id="q1", b=0.0, c=1.0, b_passed=False, c_passed=True)]),
        Profile(id="p1", run_id="r1", round=1, harness_id="h", checkpoint_id="ck1",
                prefer=[ProfileEntry(when="add", behavior="finishes")], val_success=0.9, per_task={"q1": 1.0},
                categories={"add": [1, 1, 0]}, source="gpt", reason=""),
        PoolMember(id="pm1", run_id="r1", harness_id="h", parent="h0", round=0, direction="d0", causes=["c"],
                   val_score=0.5, solved=["q1"], selected=True),
        Ballot(id="v1", run_id="r1", checkpoint_id="ck1", task_id="q1", voter="llm0", purpose="rank",
               ranking=["h", "h0"], kind="llm"),
        LLMCallRecord(id="l1", run_id="r1", role="editor", model="gpt", input_tokens=10, output_tokens=5,
                      cost_usd=0.001, latency_s=0.5, request={"messages": []}, response={"content": "{}"}),
        BudgetRecord(id="r1:eval:ev1", run_id="r1", round=1, phase="validate", split="val", rollouts=4,
                     policy_input_tokens=100, policy_output_tokens=20, meta_calls=1, meta_cost_usd=0.001),
        Phase(id="r1-phase0", run_id="r1", index=0, cycle=0, kind="weights", length=0.5, unit="epochs", steps=2,
              harness_id="h", checkpoint="ck1", signal=[0.5, 0.75], fields=["/prompt"], stop_reason="patience",
              started_at=1764547200.25, ended_at=1764547260.5),
        ExperienceRecord(run_id="r1", lineage="h0", version=2, round=1, lessons=["read first", "check"],
                         offered=["check"]),
        BaseChoice(id="b1", run_id="r1", round=1, direction="d0", index=0, base_id="h0", incumbent_id="h",
                   candidate_id="cand", child_id="c", reason="older", evidence={"archive": [{"index": 0}]}),
        ModelProposal(id="m1", run_id="r1", round=1, harness_id="h", kind="merge", sources=["ck0", "ck1"],
                      alpha=[0.5, 0.5], checkpoint_id="ck2", status="scored", val=0.5, timr=0.0, evaluation_id="ev1"),
        Promotion(id="pr1", run_id="r1", round=1, harness_id="h", checkpoint_id="ck1", accepted=True, margin=0.05,
                  reason="wins", incumbent=pair.model_copy(update={"harness_id": "h0"}), best=pair),
        Decomposition(id="d1", run_id="r1", env="toy", split="test", k=2, harnesses={"start": "h0", "final": "h"},
                      checkpoints={"start": "ck0", "final": "ck1"},
                      cells={"h0_w0": "ev0", "h0_wf": "ev1", "hf_w0": "ev2", "hf_wf": "ev3"}),
        ExportRecord(id="x1", run_id="r1", harness_id="h", checkpoint_id="ck1", kind="harness", path="/agents/a/v2",
                     version=2),
        RunHarness(id="r2/h", run_id="r2", harness_id="h", origin="base", parents=[]),
    ]


@pytest.fixture
def archive(db_url):
    """An empty archive on SQLite, then on PostgreSQL (``db_url`` in tests/conftest.py)."""
    with Archive(db_url) as arch:
        yield arch


def test_trajectory_round_trips_with_token_ids_and_logprobs(archive):
    traj = chained_trajectory()
    archive.add_trajectories([traj], evaluation_id="e1", run_id="r1")
    back = archive.get(Trajectory, "t1")
    assert back == traj
    assert back.calls[2].prompt_token_ids == traj.calls[2].prompt_token_ids
    assert back.calls[2].logprobs == traj.calls[2].logprobs
    assert [s.input_ids for s in back.segments()] == [s.input_ids for s in traj.segments()]
    assert archive.list(Trajectory, evaluation_id="e1") == [traj]
    assert archive.list(Trajectory, evaluation_id="other") == []


def test_get_many_reads_trajectories_in_one_query_in_the_order_asked(archive):
    trajs = [Trajectory(id=f"t{i}", task_id=f"task-{i}", reward=i / 10) for i in range(3)]
    archive.add_trajectories(trajs, evaluation_id="e1", run_id="r1")
    statements = []
    from sqlalchemy import event

    event.listen(archive.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    got = archive.get_many(Trajectory, ["t2", "missing", "t0", "t2"])
    assert [t.id for t in got] == ["t2", "t0", "t2"] and got[1] == trajs[0]
    assert len([s for s in statements if s.lstrip().upper().startswith("SELECT")]) == 1
    assert archive.get_many(Trajectory, []) == []


def test_codec_shares_prefixes_and_restores_unchained_calls_exactly():
    traj = chained_trajectory(turns=6)
    body = codec.encode(traj)
    assert len(body) < len(traj.model_dump_json()) / 2
    # a rewritten context (history window) and a call without tokens break the chain
    cut = traj.model_copy(deep=True)
    cut.calls[3].input = cut.calls[3].input[-2:]
    cut.calls[3].prompt_token_ids = cut.calls[3].prompt_token_ids[-10:]
    cut.calls[4].prompt_token_ids = None
    cut.calls[5].logprobs = [-math.inf, float("nan")] + cut.calls[5].logprobs[2:]
    back = codec.decode(codec.encode(cut))
    assert back.calls[:5] == cut.calls[:5]
    assert back.calls[5].logprobs[0] == -math.inf and math.isnan(back.calls[5].logprobs[1])
    assert back.messages == cut.messages


def test_reinserting_the_same_ids_replaces_rows_instead_of_duplicating(archive):
    trajs = [chained_trajectory(f"t{i}", task_id=f"task-{i}") for i in range(3)]
    archive.add_trajectories(trajs, evaluation_id="e1")
    changed = trajs[1].model_copy(update={"reward": 0.0, "passed": False})
    archive.add_trajectories([changed, trajs[2]], evaluation_id="e1")
    assert archive.count(Trajectory, evaluation_id="e1") == 3
    assert archive.get(Trajectory, "t1").reward == 0.0
    spec = HarnessSpec(name="x")
    assert archive.add_harness(spec, origin="base") == spec.id
    archive.add_harness(spec, origin="base")
    assert [h.id for h in archive.list(HarnessRecord)] == [spec.id]
    assert HarnessSpec.model_validate(archive.get(HarnessRecord, spec.id).spec) == spec


def test_every_kind_round_trips_as_the_domain_model_it_is(archive):
    records = samples()
    assert {type(r) for r in records} == set(TABLES)  # a newly registered kind needs a sample here
    archive.put(*records)
    for record in records:
        assert archive.get(type(record), record.id) == record, type(record).__name__
        assert archive.list(type(record), id=record.id) == [record]
    assert archive.get(Phase, "r1-phase0").started_at == dt.datetime(2025, 12, 1, 0, 0, 0, 250000, tzinfo=dt.UTC)
    assert archive.list(EditRecord, run_id="r1", parent_id="p")[0].patch[0]["op"] == "replace"
    assert archive.list(Profile, harness_id="h")[0].prefer == [ProfileEntry(when="add", behavior="finishes")]
    assert archive.list(LLMCallRecord, role="editor")[0].cost_usd == 0.001
    assert archive.list(Ballot, kind="llm", task_id="q1")[0].ranking == ["h", "h0"]
    assert archive.get(Promotion, "pr1").promoted == next(r for r in records if isinstance(r, Promotion)).best
    assert archive.count(GateDecision, run_id="r1", accepted=True) == 1
    assert archive.count(GateDecision, run_id="r2") == archive.count(GateDecision, accepted=False) == 0
    assert archive.resolve_id("evaluations", "ev") == "ev1"
    with pytest.raises(ArchiveError, match="Ballot has no field 'votes' to filter on"):
        archive.list(Ballot, votes=1)
    with pytest.raises(ArchiveError, match="Plan is not a kind the archive stores"):
        archive.put(Plan(strategy="whale", cycles=1, weight_epochs=1.0, search_iterations=1))


def test_put_new_stores_a_record_once_and_says_whether_it_did(archive):
    first = BudgetRecord(id="r1:eval:ev1", run_id="r1", rollouts=4)
    assert archive.put_new(first) is True
    assert archive.put_new(first.model_copy(update={"rollouts": 8})) is False
    assert [b.rollouts for b in archive.list(BudgetRecord, run_id="r1")] == [4]
    with pytest.raises(ArchiveError, match=r"no run 'zz' in .* \(no run id starts with it\)"):
        archive.resolve_id("runs", "zz")


def test_claim_run_is_all_or_nothing_so_of_two_processes_that_read_the_same_run_one_claims_it(archive):
    """A claim swaps the run's heartbeat and status in one transaction, each only if still as read: the first of
    two processes that read the same rows wins; the second, or one that read a status since changed, changes
    nothing (its heartbeat write is rolled back). A new run's row is stored only where none has its id."""
    archive.put(RunRecord(id="r1", strategy="vace", status="failed"),
                RunHeartbeat(id="r1", host="h", pid=1, at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)))
    read = archive.get(RunHeartbeat, "r1")
    assert archive.claim_run(RunHeartbeat(id="r1", host="h", pid=2), read, ("failed", "running")) is True
    assert archive.claim_run(RunHeartbeat(id="r1", host="h", pid=3), read, ("failed", "running")) is False
    now = archive.get(RunHeartbeat, "r1")
    assert archive.claim_run(RunHeartbeat(id="r1", host="h", pid=4), now, ("failed", "running")) is False
    assert (archive.get(RunHeartbeat, "r1").pid, archive.get(RunRecord, "r1").status) == (2, "running")
    assert archive.claim_run(RunHeartbeat(id="r2", host="h", pid=5), None, RunRecord(id="r2", strategy="vace")) is True
    assert archive.claim_run(RunHeartbeat(id="r3", host="h", pid=6), None, RunRecord(id="r2", strategy="x")) is False
    assert archive.get(RunHeartbeat, "r3") is None and archive.get(RunRecord, "r2").strategy == "vace"


def test_a_failing_batch_writes_nothing(archive):
    original = chained_trajectory("t1")
    archive.add_trajectories([original])
    replaced = original.model_copy(update={"reward": 0.0})
    broken = chained_trajectory("t5")
    broken.task_id = None  # type: ignore[assignment]  # violates NOT NULL inside the transaction
    with pytest.raises(Exception, match="(?i)not.null"):
        archive.add_trajectories([replaced, chained_trajectory("t4"), broken])
    assert [t.id for t in archive.list(Trajectory)] == ["t1"]
    assert archive.get(Trajectory, "t1").reward == original.reward
    with pytest.raises(ArchiveError, match="duplicate ids"):
        archive.add_trajectories([chained_trajectory("t3"), chained_trajectory("t3")])
    assert archive.count(Trajectory) == 1


def test_the_sqlite_file_uses_wal(tmp_path):
    Archive(tmp_path / "w.db").close()
    mode = sqlite3.connect(tmp_path / "w.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_opening_a_newer_schema_names_the_version_and_the_fix(tmp_path):
    path = tmp_path / "new.db"
    Archive(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaVersionError, match=rf"schema version {SCHEMA_VERSION + 1}.*upgrade coevo"):
        Archive(path)


def test_in_memory_and_url_targets(tmp_path):
    with Archive(":memory:") as mem:
        mem.add_trajectories([chained_trajectory()])
        assert mem.count(Trajectory) == 1
    with Archive(f"sqlite:///{tmp_path / 'u.db'}") as by_url:
        assert by_url.schema_version == SCHEMA_VERSION


def test_record_tables_keep_the_schema_of_older_archives(tmp_path):
    Archive(tmp_path / "new.db").close()
    with sqlite3.connect(tmp_path / "new.db") as conn:
        created = {sql for (sql,) in conn.execute("SELECT sql FROM sqlite_master WHERE tbl_name IN "
                                                  "('trajectories', 'policy_checkpoints') AND sql IS NOT NULL")}
    new_columns = {"\n\tinterface_violations INTEGER NOT NULL, ":
                   "\n\tinterface_violations INTEGER NOT NULL, \n\tviolation_turns INTEGER NOT NULL, ",
                   "\n\tcreated_at FLOAT NOT NULL, \n\tPRIMARY KEY (id)\n)":  # a checkpoint's serving details
                   "\n\tcreated_at FLOAT NOT NULL, \n\tmodel_ref VARCHAR, \n\tvllm JSON NOT NULL, "
                   "\n\tPRIMARY KEY (id)\n)"}

    def now(sql: str) -> str:
        for old, new in new_columns.items():
            sql = sql.replace(old, new) if "policy_checkpoints" in sql or "violation" in old else sql
        return sql

    assert created == {now(sql) for sql in OLD_RECORD_DDL}
    traj = chained_trajectory("t1")
    old_row = {**{c: getattr(traj, c, None) for c in OLD_TRAJECTORY_COLUMNS},
               "evaluation_id": "e1", "run_id": "r1", "body": codec.encode(traj), "created_at": 1.0}
    with sqlite3.connect(tmp_path / "old.db") as conn:  # written as the code before the change wrote it
        for sql in sorted(OLD_RECORD_DDL, key=lambda sql: "INDEX" in sql):  # tables before their indexes
            conn.execute(sql)
        conn.execute("INSERT INTO policy_checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     ("ck1", "smollm2-135m", "/a", '["ck0"]', '{"lr": 1e-05}', '{"loss": 0.5}', "r1", 1.0))
        conn.execute(f"INSERT INTO trajectories ({', '.join(old_row)}) VALUES ({', '.join('?' * len(old_row))})",
                     tuple(old_row.values()))
        conn.execute("CREATE TABLE schema_version (id INTEGER NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (id))")
        conn.execute("INSERT INTO schema_version VALUES (1, 1)")  # schema version 1: no violation_turns column
    with Archive(tmp_path / "old.db") as archive:
        assert archive.schema_version == SCHEMA_VERSION == 3 and archive.revision == head()
        assert archive.get(Checkpoint, "ck1") == Checkpoint(id="ck1", base_model="smollm2-135m", adapter_path="/a",
                                                           parents=["ck0"], config={"lr": 1e-5},
                                                           metrics={"loss": 0.5}, run_id="r1", created_at=1.0)
        assert archive.list(Trajectory, run_id="r1", harness_id=traj.harness_id, task_id=traj.task_id) == [traj]
        archive.put(Checkpoint(id="ck2", base_model="smollm2-135m", parents=["ck1"], run_id="r1"))
        archive.add_trajectories([chained_trajectory("t2")], evaluation_id="e1", run_id="r1")
        assert [c.id for c in archive.list(Checkpoint, run_id="r1")] == ["ck1", "ck2"]
        assert archive.count(Trajectory, evaluation_id="e1") == 2
        assert archive.get(Trajectory, "t2") == chained_trajectory("t2")


def test_a_scalar_field_added_to_trajectory_becomes_a_column():
    class Extended(Trajectory):
        context_rewrites: int = 0
        tags: list[str] = []

    assert scalar_fields(Extended) == scalar_fields(Trajectory) + ("context_rewrites",)
    columns = set(TABLES[Trajectory].table.c.keys())
    assert set(scalar_fields(Trajectory)) < columns and {"messages", "calls", "hook_events"}.isdisjoint(columns)
    assert set(TABLES[Checkpoint].table.c.keys()) == set(Checkpoint.model_fields)  # stored as it is


def test_writes_of_the_branch_tables_take_the_sqlite_write_lock_at_begin(tmp_path):
    """Every write transaction begins ``IMMEDIATE`` on SQLite (``storage.connection.writing``), the
    CoEvo-RSI, WHALE and Harness-S tables' included: concurrent writers wait for the lock at BEGIN
    instead of failing with "database is locked" when a read is upgraded to a write."""
    from sqlalchemy import event


    with Archive(tmp_path / "a.db") as archive:
        begins: list[str] = []

        @event.listens_for(archive.engine, "before_cursor_execute")
        def _seen(conn, cursor, statement, *args):
            if statement.startswith("BEGIN"):
                begins.append(statement)

        branch = [r for r in samples() if isinstance(r, (BaseChoice, ModelProposal, Promotion, Phase, PoolMember,
                                                         Ballot))]
        archive.put(*branch[:3])
        for record in branch[3:]:
            archive.put(record)
        archive.put_new(BudgetRecord(id="b1", run_id="r1"))
        assert begins == ["BEGIN IMMEDIATE"] * 5
        assert [len(archive.list(type(r), run_id="r1")) for r in branch] == [1] * 6
