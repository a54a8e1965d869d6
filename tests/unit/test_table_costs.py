"""A table invocation that never writes its table still counts in the table's cost (issue 39: CPU seconds
summed over every invocation): ``coevo.app.table_costs`` records it while it runs, a real process stopped by
SIGTERM or ``kill -9`` leaves its record, and the next invocation folds it into the results once."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from coevo.app.table_costs import STALE_S, CostLedger, Invocation, stopped_invocations

KEY = {"config": {"strategy": "vace", "seed": 0}, "table": {"name": "t"}, "budget": None}

CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from coevo.app.table_costs import CostLedger

    key = {"config": {"strategy": "vace", "seed": 0}, "table": {"name": "t"}, "budget": None}
    with CostLedger(Path(sys.argv[1]), "table_t.seeds-1", "abc", [1], key, interval_s=float(sys.argv[2])) as ledger:
        end = time.process_time() + 0.5
        while time.process_time() < end:  # half a CPU second the record must show
            pass
        if sys.argv[3] == "hold":  # the signal lands while this thread holds the ledger's lock (as in done())
            ledger._lock.acquire()
        Path(sys.argv[1], "busy").write_text("done")
        time.sleep(600)
""")


def _busy(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _record(folder: Path, stem: str, pid: int, cpu_s: float, key: dict = KEY, host: str | None = None,
            id: str = "") -> Path:
    """A record as an invocation of ``stem`` in process ``pid`` on ``host`` would have left it."""
    host = host or socket.gethostname()
    path = folder / f"{stem}.{host}-{pid}-{id or pid}.running"
    path.write_text(json.dumps({"stem": stem, "host": host, "pid": pid, "key": key,
                                "invocation": Invocation(commit="c", wall_s=cpu_s + 1, cpu_s=cpu_s, seeds=[0],
                                                         stopped=True, id=id or str(pid)).model_dump(mode="json")}))
    return path


def _gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _record_of(ledger: CostLedger) -> Invocation:
    return Invocation.model_validate(json.loads(ledger.path.read_text())["invocation"])


def test_a_ledger_records_on_entry_on_failure_and_never_after_done(tmp_path):
    with CostLedger(tmp_path, "table_t", "abc", [], KEY, interval_s=60) as ledger:
        first = json.loads(ledger.path.read_text())
        assert first["pid"] == os.getpid() and first["key"] == KEY and first["stem"] == "table_t"
        assert first["invocation"]["stopped"] is True and first["invocation"]["id"] == ledger.id
        _busy(0.2)
        now = ledger.invocation()
        ledger.done()
        assert not ledger.path.exists() and not ledger.record()  # nothing written once done
    assert not now.stopped and now.cpu_s >= 0.2 and now.id == ledger.id and not ledger.path.exists()

    before = signal.getsignal(signal.SIGTERM)  # the test worker's own (another test may have set one)
    with pytest.raises(RuntimeError):
        with CostLedger(tmp_path, "table_t", "abc", [], KEY, interval_s=60) as failed:
            assert signal.getsignal(signal.SIGTERM) == failed._terminated
            _busy(0.2)
            raise RuntimeError("a run failed")
    last = _record_of(failed)
    assert last.stopped and last.cpu_s >= 0.2  # the record written at the failure, not the one on entry
    assert signal.getsignal(signal.SIGTERM) is before  # the ledger's handler is gone with it


def test_only_gone_invocations_of_the_same_table_are_folded_oldest_first(tmp_path):
    gone, gone_too, gone_three = _gone_pid(), _gone_pid(), _gone_pid()
    old = _record(tmp_path, "table_t", gone, 10.0)
    os.utime(old, (time.time() - 60, time.time() - 60))
    part = _record(tmp_path, "table_t.seeds-1", gone_too, 20.0)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = _record(tmp_path, "table_t.seeds-2", alive.pid, 30.0)  # a part running now: not folded
        _record(tmp_path, "table_t", gone_three, 40.0, key={**KEY, "budget": 7})  # another table key
        _record(tmp_path, "table_u", gone, 50.0)  # another table
        _record(tmp_path, "table_t.smoke", gone_three, 55.0)  # its smoke run
        elsewhere = _record(tmp_path, "table_t.seeds-3", 1, 60.0, host="another-host")  # beating elsewhere
        (tmp_path / "table_t.x-1-1.running").write_text("{not json")  # unreadable: skipped, kept
        got, paths = stopped_invocations(tmp_path, "table_t", KEY, parts=True)
        assert [i.cpu_s for i in got] == [10.0, 20.0] and paths == [old, part] and all(i.stopped for i in got)
        assert [i.cpu_s for i in stopped_invocations(tmp_path, "table_t.seeds-1", KEY)[0]] == [20.0]
        assert [i.cpu_s for i in stopped_invocations(tmp_path, "table_t", KEY)[0]] == [10.0]  # no parts asked
        # from another host a record not rewritten for STALE_S is gone; here the pid decides (a live one, even
        # a reused pid, keeps its record unfolded: never counted twice)
        later = time.time() + STALE_S + 1
        stale = stopped_invocations(tmp_path, "table_t", KEY, parts=True, now=later)[1]
        assert elsewhere in stale and running not in stale
    finally:
        alive.kill()
        alive.wait()
    assert running in stopped_invocations(tmp_path, "table_t", KEY, parts=True)[1]  # its process ended


def _child(tmp_path: Path, interval_s: float, hold: bool = False) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(interval_s), "hold" if hold else "-"])
    deadline = time.monotonic() + 120
    while not (tmp_path / "busy").exists():
        assert child.poll() is None and time.monotonic() < deadline, "the child ended or never got busy"
        time.sleep(0.05)
    return child


def test_sigterm_records_what_the_invocation_cost_and_ends_it_at_once(tmp_path):
    child = _child(tmp_path, interval_s=600)  # no periodic record: only the one SIGTERM writes can show the CPU
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 128 + signal.SIGTERM  # not after the 600 s sleep
    (invocation,), (path,) = stopped_invocations(tmp_path, "table_t", KEY, parts=True)
    assert path.name.startswith(f"table_t.seeds-1.{socket.gethostname()}-{child.pid}-")
    assert invocation.stopped and invocation.seeds == [1] and invocation.commit == "abc" and invocation.cpu_s >= 0.5


def test_sigterm_while_the_ledger_is_locked_still_ends_the_process(tmp_path):
    child = _child(tmp_path, interval_s=600, hold=True)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 128 + signal.SIGTERM  # the handler gave the lock up after 1 s, not hung
    (invocation,), _ = stopped_invocations(tmp_path, "table_t", KEY, parts=True)
    assert invocation.stopped  # the record written on entry stays


def test_kill_9_leaves_the_last_periodic_record(tmp_path):
    child = _child(tmp_path, interval_s=0.2)
    record = next(tmp_path.glob("table_t.seeds-1.*.running"))
    deadline = time.monotonic() + 120
    while Invocation.model_validate(json.loads(record.read_text())["invocation"]).cpu_s < 0.5:
        assert time.monotonic() < deadline, "no periodic record after the busy half second"
        time.sleep(0.1)
    child.kill()
    child.wait(timeout=30)
    (invocation,), _ = stopped_invocations(tmp_path, "table_t", KEY, parts=True)
    assert invocation.stopped and invocation.cpu_s >= 0.5
