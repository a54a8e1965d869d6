"""Ids that work (issue 29, item 3): runs are listed with their whole ids; every command that takes
an id takes a unique prefix and refuses one that several ids share, naming them; ``coevo eval``
prints its run id when it starts and refuses an unknown ``--run-id`` unless asked to create it;
runs hold a heartbeat, so ``archive list``/``show`` say when a ``running`` run is dead."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_concurrent_writers import run_files
from test_evaluate import AdderEnv, dies_after, model, spec
from test_gate_approval import patch_services
from test_meta_loop import setup_run
from typer.testing import CliRunner

from coevo.app import heartbeat
from coevo.app.heartbeat import Heartbeat, heartbeats, liveness
from coevo.app.preflight import RunError
from coevo.app.run import run_meta
from coevo.cli.app import app
from coevo.models.fake import ScriptedChatModel
from coevo.records import EvaluationRecord, HarnessRecord, RunHeartbeat, RunRecord, Trajectory
from coevo.storage import Archive

runner = CliRunner()
FAKE_CLI = Path(__file__).parent / "fake_cli.py"


def words(result) -> str:
    return " ".join(result.output.split())


def fake_eval(monkeypatch, tmp_path, policy=None):
    """``coevo eval`` on the adder env with a scripted policy; returns (harness file, db)."""
    from coevo.cli import eval as eval_cli

    monkeypatch.setattr(eval_cli, "get_env", lambda ref: AdderEnv())
    monkeypatch.setattr(eval_cli, "load_model", lambda ref, **kw: policy or model())
    harness = tmp_path / "h.json"
    harness.write_text(spec().model_dump_json())
    return str(harness), str(tmp_path / "e.db")


def eval_args(harness, db, *extra):
    return ["eval", "--env", "adder", "--harness", harness, "--model", "fake:x", "--n", "4", "--db", db, *extra]


@pytest.fixture
def done_run(tmp_path, monkeypatch):
    """A finished fake VACE run ``vace-dbdbbc3c`` (13 characters: more than the 12 lists used to show)."""
    config, ctx, archive = setup_run(tmp_path, "help")
    asyncio.run(run_meta(config, run_id="vace-dbdbbc3c", context=ctx, archive=archive))
    patch_services(monkeypatch, ctx)
    return config, archive


def test_runs_are_listed_whole_and_every_command_takes_a_unique_prefix(done_run, tmp_path):
    config, archive = done_run
    listed = runner.invoke(app, ["archive", "list", "runs", "--db", config.db])
    assert listed.exit_code == 0 and "vace-dbdbbc3c" in listed.output and "…" not in listed.output
    shown = runner.invoke(app, ["archive", "show", "vace-dbdb", "--db", config.db])
    assert shown.exit_code == 0 and shown.output.startswith("run vace-dbdbbc3c"), shown.output
    report = runner.invoke(app, ["report", "vace-dbdb", "--db", config.db, "-o", str(tmp_path / "r")])
    assert report.exit_code == 0 and (tmp_path / "r" / "index.html").is_file(), report.output
    resumed = runner.invoke(app, ["run", "--resume", "vace-dbdb", "--db", config.db, "--no-report"])
    assert resumed.exit_code == 0 and "run id: vace-dbdbbc3c" in words(resumed), resumed.output
    gc = runner.invoke(app, ["archive", "gc", "--run", "vace-dbdb", "--db", config.db])
    assert gc.exit_code == 0, gc.output
    harness = archive.list(HarnessRecord, run_id="vace-dbdbbc3c")[0].id
    exported = runner.invoke(app, ["archive", "export", harness[:10], "-o", str(tmp_path / "h.json"),
                                   "--db", config.db])
    assert exported.exit_code == 0 and (tmp_path / "h.json").is_file()


def test_a_prefix_two_runs_share_is_refused_by_every_command_naming_both(done_run, tmp_path):
    config, archive = done_run
    archive.put(RunRecord(id="vace-dbdb0000", strategy="vace", status="failed"))
    for command in (["archive", "show", "vace-dbdb"], ["report", "vace-dbdb"], ["run", "--resume", "vace-dbdb"],
                    ["archive", "gc", "--run", "vace-dbdb"],
                    ["eval", "--env", "x", "--harness", "x", "--model", "x", "--run-id", "vace-dbdb"]):
        result = runner.invoke(app, [*command, "--db", config.db])
        text = words(result)
        assert result.exit_code == 1 and text.startswith("error:"), (command, result.output)
        assert "ambiguous" in text and "vace-dbdbbc3c" in text and "vace-dbdb0000" in text, (command, text)


def test_coevo_eval_prints_its_run_id_when_it_starts_so_a_stopped_run_can_be_resumed(tmp_path, monkeypatch):
    harness, db = fake_eval(monkeypatch, tmp_path, ScriptedChatModel(script=[dies_after(3, ConnectionError("gone"))],
                                                                     with_tokens=True))
    failed = runner.invoke(app, eval_args(harness, db))
    first = failed.output.splitlines()[0]
    assert first.startswith("run eval-") and "evaluating" in first, failed.output
    run_id = first.split()[1].rstrip(":")
    assert Archive(db).get(RunRecord, run_id).status == "failed"
    harness, db = fake_eval(monkeypatch, tmp_path)
    resumed = runner.invoke(app, eval_args(harness, db, "--run-id", run_id[:9]))
    assert resumed.exit_code == 0 and resumed.output.startswith(f"run {run_id}: resuming"), resumed.output
    archive = Archive(db)
    (evaluation,) = archive.list(EvaluationRecord, run_id=run_id)
    assert evaluation.status == "done" and archive.count(Trajectory, evaluation_id=evaluation.id) == 4


def test_an_unknown_run_id_is_refused_unless_asked_to_create_it(tmp_path, monkeypatch, done_run):
    harness, db = fake_eval(monkeypatch, tmp_path)
    refused = runner.invoke(app, eval_args(harness, db, "--run-id", "eval-nothere"))
    assert refused.exit_code == 1 and "nothing to resume" in words(refused) and "--create" in words(refused)
    assert Archive(db).list(EvaluationRecord) == [] and Archive(db).list(RunRecord) == []
    created = runner.invoke(app, eval_args(harness, db, "--run-id", "eval-mine", "--create"))
    assert created.exit_code == 0 and created.output.startswith("run eval-mine: evaluating"), created.output
    again = runner.invoke(app, eval_args(harness, db, "--run-id", "eval-mine"))  # resumes: nothing re-evaluated
    assert again.exit_code == 0 and "4 tasks resumed" in words(again), again.output
    assert Archive(db).count(Trajectory) == 4
    other = runner.invoke(app, eval_args(harness, db, "--run-id", "eval-mine", "--split", "test"))
    assert other.exit_code == 1 and "split 'val' -> 'test'" in words(other), other.output
    config, _ = done_run
    meta = runner.invoke(app, eval_args(harness, config.db, "--run-id", "vace-dbdbbc3c"))
    assert meta.exit_code == 1 and "is a vace run, not an evaluation" in words(meta)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_liveness_tells_a_dead_run_from_a_live_one():
    here, now = socket.gethostname(), dt.datetime.now(dt.UTC)
    beat = lambda **kw: RunHeartbeat(**{"id": "r", "host": here, "pid": os.getpid(), "at": now, **kw})  # noqa: E731
    assert liveness(None).alive is None
    assert liveness(beat(pid=_dead_pid())).alive is False
    assert liveness(beat()).alive is False  # this process, but it beats for no such run
    with Heartbeat(Archive(":memory:"), "r"):
        assert liveness(beat()).alive is True
    stale = now - dt.timedelta(seconds=heartbeat.STALE_S + 60)
    assert liveness(beat(host="gpu7", pid=1234, at=stale)).alive is False
    assert "presumed DEAD" in liveness(beat(host="gpu7", pid=1234, at=stale)).text
    assert liveness(beat(host="gpu7", pid=1234)).alive is True


def test_a_heartbeat_beats_while_its_block_runs(tmp_path):
    archive = Archive(tmp_path / "a.db")
    with Heartbeat(archive, "r", interval_s=0.05):
        first = heartbeats(archive)["r"].at
        time.sleep(0.3)
        later = heartbeats(archive)["r"]
    assert later.at > first and later.pid == os.getpid() and later.host == socket.gethostname()
    assert liveness(heartbeats(archive)["r"]).alive is False  # the block ended: nobody beats for it


def test_a_run_killed_before_its_first_checkpoint_resumes_from_the_start(tmp_path):
    """A kill -9 between the run's row and the graph's first checkpoint (the heartbeat is already
    written): the resume starts the graph from its input rather than failing with nothing to continue."""
    config, ctx, archive = setup_run(tmp_path, "help")
    archive.put(RunRecord(id="vace-early", strategy="vace", config=config.model_dump(mode="json")))
    state = asyncio.run(run_meta(config, run_id="vace-early", resume=True, context=ctx, archive=archive))
    assert state["run_id"] == "vace-early" and state["decisions"]
    assert archive.get(RunRecord, "vace-early").status == "done"


@contextmanager
def another_process() -> Iterator[int]:
    """The pid of a live process standing in for another coevo process (put in a run's heartbeat), killed on leaving."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield other.pid
    finally:
        other.kill()
        other.wait()


def assert_left_running(archive: Archive, run_id: str, pid: int, evaluations: int = 0) -> None:
    """A refused process changed nothing: the run is still ``running``, beating from ``pid``, and the archive holds
    the ``evaluations`` it held before (none: nothing was evaluated)."""
    assert archive.get(RunRecord, run_id).status == "running" and len(archive.list(EvaluationRecord)) == evaluations
    assert heartbeats(archive)[run_id].pid == pid


def test_a_run_another_process_is_running_now_is_not_resumed_beside_it(tmp_path):
    """Two processes on one run would write the same rounds: a resume of a run whose heartbeat is alive is
    refused, naming that process, with nothing changed; once that process is gone the same resume runs."""
    config, ctx, archive = setup_run(tmp_path, "help")
    archive.put(RunRecord(id="vace-busy", strategy="vace", config=config.model_dump(mode="json")))
    with another_process() as pid:
        archive.put(RunHeartbeat(id="vace-busy", host=socket.gethostname(), pid=pid))
        with pytest.raises(RunError, match=rf"run vace-busy is running now \(alive: pid {pid} on this host.*"
                                           "nothing was changed"):
            asyncio.run(run_meta(config, run_id="vace-busy", resume=True, context=ctx, archive=archive))
        assert_left_running(archive, "vace-busy", pid)
    state = asyncio.run(run_meta(config, run_id="vace-busy", resume=True, context=ctx, archive=archive))
    assert state["decisions"] and archive.get(RunRecord, "vace-busy").status == "done"


def test_a_run_started_again_under_its_id_while_another_process_starts_it_is_refused(tmp_path):
    """``coevo compare`` starts a run anew under its fixed id when the run has a row but no checkpoint (a
    process stopped, or still loading, before its first one): that start is claimed as a resume is, so a
    second process is refused while the first is alive, nothing changed, and runs once it is gone."""
    config, ctx, archive = setup_run(tmp_path, "help")
    archive.put(RunRecord(id="vace-twice", strategy="vace", config=config.model_dump(mode="json")))
    with another_process() as pid:
        archive.put(RunHeartbeat(id="vace-twice", host=socket.gethostname(), pid=pid))
        with pytest.raises(RunError, match=rf"run vace-twice is running now \(alive: pid {pid} on this host"):
            asyncio.run(run_meta(config, run_id="vace-twice", context=ctx, archive=archive))
        assert_left_running(archive, "vace-twice", pid)
    state = asyncio.run(run_meta(config, run_id="vace-twice", context=ctx, archive=archive))
    assert state["decisions"] and archive.get(RunRecord, "vace-twice").status == "done"


@pytest.mark.parametrize("other", ["alive", "gone"])
def test_a_new_run_whose_id_another_process_stores_while_this_one_prepares_is_refused_with_nothing_changed(
        tmp_path, monkeypatch, other):
    """Two ``coevo compare`` processes starting one seed's run (a fixed id) at the same moment both find no row.
    A new run stores its row and heartbeat in one transaction, only if no other process stored them, so the second
    to get there is refused before it runs anything: the first one's row and heartbeat stay as they are, whether
    that process still runs or has ended."""
    from coevo.app import run as run_module

    config, ctx, archive = setup_run(tmp_path, "help")
    original = run_module._services
    with another_process() as live:
        pid = live if other == "alive" else _gone_pid()

        def services_while_another_process_starts_the_run(*args, **kwargs):
            archive.put(RunRecord(id="vace-race", strategy="vace", config=config.model_dump(mode="json")),
                        RunHeartbeat(id="vace-race", host=socket.gethostname(), pid=pid))
            return original(*args, **kwargs)

        monkeypatch.setattr(run_module, "_services", services_while_another_process_starts_the_run)
        refusal = (rf"run vace-race is running now \(alive: pid {pid}" if other == "alive" else
                   "run vace-race was claimed by another process while this one checked it")
        with pytest.raises(RunError, match=refusal + ".*nothing was changed"):
            asyncio.run(run_meta(config, run_id="vace-race", context=ctx, archive=archive))
        assert_left_running(archive, "vace-race", pid)


def test_of_two_processes_that_find_a_run_stopped_only_the_first_to_claim_it_runs_it(tmp_path, monkeypatch):
    """Two resumes (or two ``coevo compare`` restarts) of a run whose process is gone both read its dead heartbeat;
    the claim replaces that heartbeat only if it is still the one read (one compare-and-swap), so the process
    that claims second is refused, nothing changed, leaving the first one's claim."""
    from coevo.app import heartbeat as heartbeat_module

    config, ctx, archive = setup_run(tmp_path, "help")
    archive.put(RunRecord(id="vace-both", strategy="vace", status="failed", config=config.model_dump(mode="json")),
                RunHeartbeat(id="vace-both", host=socket.gethostname(), pid=_gone_pid()))
    original = heartbeat_module.liveness
    with another_process() as pid:
        def checked_while_the_other_process_claims(beat, *args, **kwargs):
            verdict = original(beat, *args, **kwargs)  # the dead heartbeat this process read
            archive.put(RunHeartbeat(id="vace-both", host=socket.gethostname(), pid=pid))
            archive.update_run("vace-both", status="running")
            return verdict

        monkeypatch.setattr(heartbeat_module, "liveness", checked_while_the_other_process_claims)
        with pytest.raises(RunError, match="run vace-both was claimed by another process while this one checked it"
                                           ".*nothing was changed"):
            asyncio.run(run_meta(config, run_id="vace-both", resume=True, context=ctx, archive=archive))
        assert_left_running(archive, "vace-both", pid)


def test_a_status_read_before_another_process_claimed_the_run_does_not_let_a_second_claim_through(tmp_path):
    """A process that read the run ``failed``, then (after another process claimed it) that process's live
    heartbeat, is refused: the claim moves the status only from the one read, in the heartbeat's transaction."""
    from coevo.app.heartbeat import take

    archive = Archive(tmp_path / "a.db")
    archive.put(RunRecord(id="vace-late", strategy="vace", status="running"))
    with another_process() as pid:
        archive.put(RunHeartbeat(id="vace-late", host=socket.gethostname(), pid=pid))
        with pytest.raises(RunError, match="run vace-late was claimed by another process"):
            take(archive, "vace-late", "failed")
        assert_left_running(archive, "vace-late", pid)


def test_a_claim_beats_while_the_run_loads_and_hands_the_beating_over(tmp_path):
    """Loading a policy can outlast a heartbeat's staleness (``STALE_S``): a claim beats from a thread until the
    run's driver takes over, without counting as driving it (so a resume still removes its unfinished stages)."""
    from coevo.app import heartbeat as heartbeat_module
    from coevo.app.heartbeat import Claim

    archive = Archive(tmp_path / "a.db")
    archive.put(RunRecord(id="vace-slow", strategy="vace", status="failed"))
    names = lambda: {t.name for t in threading.enumerate()}  # noqa: E731
    with Claim(archive, archive.get(RunRecord, "vace-slow")) as claimed:
        assert "heartbeat-vace-slow" in names() and "vace-slow" not in heartbeat_module._beating
        assert heartbeats(archive)["vace-slow"].pid == os.getpid()
        claimed.hand_over()
        assert "heartbeat-vace-slow" not in names()
    assert archive.get(RunRecord, "vace-slow").status == "running"


def test_a_run_paused_at_a_gate_question_and_taken_over_meanwhile_is_not_driven_on_by_its_answer(tmp_path):
    """``coevo run --approve-gate`` waits for the answer with the run ``paused`` and no heartbeat beating, so
    ``coevo run --resume RUN --answer`` from another terminal may take the run over meanwhile; the first
    process's answer is then refused, nothing changed, instead of both driving the run."""
    from test_gate_approval import two_candidate_run

    from coevo.app import run as run_module

    config, ctx, archive = two_candidate_run(tmp_path)

    async def pause_then_answer(pid):
        start = await run_module.prepare_start(config, approve=True, services=False, archive=archive)
        async with run_module.start_run(start, archive, "run-1", context=ctx) as run:
            paused = await run.advance()
            assert "__interrupt__" in paused and archive.get(RunRecord, "run-1").status == "paused"
            seen = len(archive.list(EvaluationRecord))
            archive.put(RunHeartbeat(id="run-1", host=socket.gethostname(), pid=pid))  # the other process's claim
            archive.update_run("run-1", status="running")
            with pytest.raises(RunError, match="run run-1 was taken over by another process while this one waited"
                                               ".*nothing was changed"):
                await run.advance({i.id: "yes" for i in paused["__interrupt__"]})
            return seen

    with another_process() as pid:
        seen = asyncio.run(pause_then_answer(pid))
        assert_left_running(archive, "run-1", pid, evaluations=seen)


@pytest.mark.parametrize("resume, step", [(True, "check_task_ids"), (True, "open_checkpointer"),
                                          (False, "_services"), (False, "open_checkpointer")])
def test_a_run_is_claimed_before_it_loads_anything_and_given_back_if_it_fails_before_it_is_driven(
        tmp_path, monkeypatch, resume, step):
    """Loading a policy can take minutes: a resume (or a start under a stored id) marks the run running with its
    own heartbeat right after the check, so a second process meanwhile finds it running and alive and is refused.
    One that fails before its run is driven (while it loads, builds its services or opens the checkpointer)
    leaves the run as it found it (status and heartbeat)."""
    from coevo.app import run as run_module

    config, ctx, archive = setup_run(tmp_path, "help")
    archive.put(RunRecord(id="vace-claim", strategy="vace", status="failed", config=config.model_dump(mode="json")))
    killed = _gone_pid()
    archive.put(RunHeartbeat(id="vace-claim", host=socket.gethostname(), pid=killed))
    seen = []

    def failing(*args, **kwargs):
        seen.append((archive.get(RunRecord, "vace-claim").status, heartbeats(archive)["vace-claim"].pid))
        raise RuntimeError(f"{step} failed")

    monkeypatch.setattr(run_module, step, failing)
    with pytest.raises(RuntimeError, match=f"{step} failed"):
        asyncio.run(run_meta(config, run_id="vace-claim", resume=resume, context=ctx, archive=archive))
    assert seen == [("running", os.getpid())]  # claimed while it loaded
    assert archive.get(RunRecord, "vace-claim").status == "failed" and heartbeats(archive)["vace-claim"].pid == killed


def _gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_run_killed_with_sigkill_is_listed_dead_and_resumes(tmp_path, monkeypatch):
    db = str(tmp_path / "k.db")
    # eight rounds on the fake policy: long enough that the first heartbeat is seen before the run ends
    proc = subprocess.Popen([sys.executable, str(FAKE_CLI), "run", str(run_files(tmp_path, db)), "--no-report",
                             "--set", "rounds=8"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if Path(db).is_file() and heartbeats(Archive(db)):
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    (run,) = Archive(db).list(RunRecord)
    if run.status == "done":
        pytest.skip("the run finished before it could be killed")
    assert run.status == "running"
    listed = runner.invoke(app, ["archive", "list", "runs", "--db", db])
    assert listed.exit_code == 0 and f"DEAD: its process (pid {proc.pid} on this host) is gone" in words(listed)
    shown = runner.invoke(app, ["archive", "show", run.id, "--db", db])
    assert shown.exit_code == 0 and '"verdict": "running (DEAD' in shown.output
    _, ctx, _ = setup_run(tmp_path, "help", db=db)
    patch_services(monkeypatch, ctx)
    resumed = runner.invoke(app, ["run", "--resume", run.id[:8], "--db", db, "--no-report"])
    assert resumed.exit_code == 0, resumed.output
    assert Archive(db).get(RunRecord, run.id).status == "done"
