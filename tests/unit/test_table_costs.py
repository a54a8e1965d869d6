"""A table invocation that never writes its table still counts in the table's cost (issue 39: CPU seconds
summed over every invocation): ``coevo.app.table_costs`` records it while it runs, a real process stopped by
SIGTERM or ``kill -9`` leaves its record, and the next invocation folds it into the results once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from coevo.app.table_costs import CostLedger, Invocation, stopped_invocations

CONFIG = {"strategy": "vace", "seed": 0}

CHILD = textwrap.dedent("""
    import signal, sys, time
    from pathlib import Path
    from coevo.app.table_costs import CostLedger

    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    with CostLedger(Path(sys.argv[1]), "table_t.seeds-1", "abc", [1], {"strategy": "vace", "seed": 0},
                    interval_s=0.2):
        end = time.process_time() + 0.5
        while time.process_time() < end:  # half a CPU second the record must show
            pass
        Path(sys.argv[1], "busy").write_text("done")
        time.sleep(600)
""")


def _record(folder: Path, stem: str, pid: int, config: dict, cpu_s: float, host: str | None = None) -> Path:
    import socket

    path = folder / f"{stem}.running-{host or socket.gethostname()}-{pid}.json"
    path.write_text(json.dumps({"host": host or socket.gethostname(), "pid": pid, "config": config,
                                "invocation": Invocation(commit="c", wall_s=cpu_s + 1, cpu_s=cpu_s, seeds=[0],
                                                         stopped=True).model_dump(mode="json")}))
    return path


def _gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_ledger_records_on_entry_keeps_its_record_when_the_block_fails_and_removes_it_when_done(tmp_path):
    with CostLedger(tmp_path, "table_t", "abc", [], CONFIG, interval_s=60) as ledger:
        first = json.loads(ledger.path.read_text())
        assert first["pid"] == os.getpid() and first["config"] == CONFIG
        assert first["invocation"]["stopped"] is True and first["invocation"]["commit"] == "abc"
        end = time.process_time() + 0.2
        while time.process_time() < end:
            pass
        now = ledger.invocation()
    assert not now.stopped and now.cpu_s >= 0.2 and now.wall_s >= now.cpu_s * 0.5
    ledger.done()
    assert not ledger.path.exists()

    with pytest.raises(RuntimeError):
        with CostLedger(tmp_path, "table_t", "abc", [], CONFIG, interval_s=60) as ledger:
            end = time.process_time() + 0.2
            while time.process_time() < end:
                pass
            raise RuntimeError("a run failed")
    last = Invocation.model_validate(json.loads(ledger.path.read_text())["invocation"])
    assert last.stopped and last.cpu_s >= 0.2  # the final record, not the one written on entry


def test_only_gone_processes_of_the_same_table_and_config_are_folded_oldest_first(tmp_path):
    gone, gone_too, gone_three = _gone_pid(), _gone_pid(), _gone_pid()
    old = _record(tmp_path, "table_t", gone, CONFIG, 10.0)
    os.utime(old, (time.time() - 100, time.time() - 100))
    part = _record(tmp_path, "table_t.seeds-1", gone_too, CONFIG, 20.0)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _record(tmp_path, "table_t.seeds-2", alive.pid, CONFIG, 30.0)  # a part running now: not folded
        _record(tmp_path, "table_t", gone_three, {**CONFIG, "seed": 5}, 40.0)  # another run config
        _record(tmp_path, "table_u", gone, CONFIG, 50.0)  # another table
        (tmp_path / "table_t.running-x-1.json").write_text("{not json")  # unreadable: skipped, kept
        got, paths = stopped_invocations(tmp_path, "table_t", CONFIG, parts=True)
        assert [i.cpu_s for i in got] == [10.0, 20.0] and paths == [old, part]
        assert all(i.stopped for i in got)
        only_own, _ = stopped_invocations(tmp_path, "table_t.seeds-1", CONFIG)
        assert [i.cpu_s for i in only_own] == [20.0]
    finally:
        alive.kill()
        alive.wait()
    assert [i.cpu_s for i in stopped_invocations(tmp_path, "table_t", CONFIG, parts=True)[0]] == [10.0, 20.0, 30.0]


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_a_process_stopped_by_a_signal_leaves_what_it_cost(tmp_path, how):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)])
    deadline = time.monotonic() + 120
    while not (tmp_path / "busy").exists():
        assert child.poll() is None and time.monotonic() < deadline, "the child ended or never got busy"
        time.sleep(0.05)
    time.sleep(0.5)  # a periodic record after the busy half second (every 0.2 s)
    child.send_signal(how)
    child.wait(timeout=60)
    (invocation,), (path,) = stopped_invocations(tmp_path, "table_t", CONFIG, parts=True)
    assert path.name.startswith("table_t.seeds-1.running-") and path.name.endswith(f"-{child.pid}.json")
    assert invocation.stopped and invocation.seeds == [1] and invocation.commit == "abc"
    assert invocation.cpu_s >= 0.5 and invocation.wall_s >= 0.5
