"""Hostile code in the python tool's sandbox (issue 29, item 1): reading what the parent can read (a
suite's answer file, the run's archive, $HOME, /proc/<parent>), writing outside the scratch
directory, a fork bomb, filling the disk, opening sockets — each denied or cut with a clear
observation, and the parent unharmed.

These need the filesystem view (bubblewrap, installed by scripts/setup.sh): without it they skip with
the reason, except under ``COEVO_REQUIRE_SANDBOX=1`` (what ``.ci/run`` sets), where they fail.
"""

import ast
import importlib.util
import os
import socket
import sqlite3
import sys
import time
import uuid
from pathlib import Path

import pytest

from coevo.envs.sandbox import PROCESS_LIMIT, isolation, python_tool, run_python
from coevo.envs.sandbox_view import interpreter_view

REQUIRE_ENV = "COEVO_REQUIRE_SANDBOX"

# prints "READ <n bytes>" or "DENIED <exception>" for each path in PATHS (set by the test)
READ_EACH = """
for p in PATHS:
    try:
        with open(p, 'rb') as f:
            print('READ', p, len(f.read()), flush=True)
    except OSError as exc:
        print('DENIED', p, type(exc).__name__, flush=True)
"""


@pytest.fixture(scope="module", autouse=True)
def view():
    """The filesystem view must apply here (else skip, or fail under COEVO_REQUIRE_SANDBOX=1)."""
    found = isolation()
    if found["files"] != "bwrap":
        why = f"the python sandbox has no filesystem view here: {found.get('fallback')}"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {why}", pytrace=False)
        pytest.skip(why)
    return found


@pytest.fixture(autouse=True)
def parent_unharmed():
    """After every hostile run the parent still runs sandboxed code normally."""
    yield
    again = run_python("print(6 * 7)")
    assert again.exit_code == 0 and again.stdout.strip() == "42", again.observation()


def read_each(paths) -> str:
    obs = run_python(f"PATHS = {[str(p) for p in paths]!r}\n" + READ_EACH).observation()
    assert obs.startswith("exit code 0"), obs
    return obs


def test_a_suites_answer_file_is_not_in_the_view():
    spec = importlib.util.find_spec("bfcl_eval")  # located, not imported (its import writes files)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("bfcl-eval is not installed (extra [bfcl])")
    answers = Path(spec.submodule_search_locations[0]) / "data" / "possible_answer" / "BFCL_v4_simple_python.json"
    gold = answers.read_text().splitlines()[0][:60]
    result = run_python(f"print(open({str(answers)!r}).read())")
    assert result.exit_code == 1 and "FileNotFoundError" in result.stderr, result.observation()
    assert gold not in result.observation()
    imported = run_python("import bfcl_eval")
    assert "ModuleNotFoundError" in imported.stderr  # the venv's site-packages are not in the view either


def test_the_runs_archive_is_not_in_the_view(tmp_path):
    db = tmp_path / "coevo.db"
    with sqlite3.connect(db) as conn:
        conn.execute("create table secrets (gold text)")
        conn.execute("insert into secrets values ('the-gold-answer-17')")
    code = (f"import sqlite3\ntry:\n    sqlite3.connect('file:{db}?mode=ro', uri=True)"
            ".execute('select * from secrets')\nexcept sqlite3.Error as exc:\n    print('DENIED', exc)\n")
    obs = run_python(code).observation()
    assert "DENIED unable to open database file" in obs and "the-gold-answer-17" not in obs
    obs = read_each([db, tmp_path])
    assert f"DENIED {db} FileNotFoundError" in obs and "READ" not in obs


def test_home_shows_only_the_path_to_the_interpreter():
    home = os.path.expanduser("~")
    on_path = {b[len(home) + 1:].split("/")[0] for b in interpreter_view(sys.executable).binds
               if b.startswith(home + "/")}
    listed = run_python(f"import os\ntry:\n    print(sorted(os.listdir({home!r})))\nexcept OSError as exc:\n"
                        "    print([], type(exc).__name__)\n")
    assert listed.exit_code == 0, listed.observation()
    assert set(ast.literal_eval(listed.stdout.split("]")[0] + "]")) <= on_path  # e.g. ['.pyenv']: Python in $HOME
    entries = [os.path.join(home, e) for e in sorted(os.listdir(home)) if e not in on_path][:20]
    entries += [os.path.join(home, ".ssh", "id_ed25519"), os.path.join(home, ".bash_history")]
    obs = read_each(entries)
    assert "READ" not in obs and obs.count("DENIED") == len(entries)


def test_the_parents_proc_entries_are_out_of_reach(monkeypatch):
    monkeypatch.setenv("COEVO_SECRET_PROBE", "hunter2")
    pid = os.getpid()
    obs = read_each([f"/proc/{pid}/environ", f"/proc/{pid}/mem", f"/proc/{pid}/cmdline", "/proc/1/environ"])
    assert "hunter2" not in obs and "READ" not in obs, obs
    ps = run_python("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    pids = ast.literal_eval(ps.stdout)
    assert pid not in pids and max(pids) < 10  # only the sandbox's own PID namespace


def test_writes_outside_the_scratch_directory_fail_and_reach_nothing(tmp_path):
    token = uuid.uuid4().hex
    stdlib = next(p for p in interpreter_view(sys.executable).binds if p.endswith(f"python3.{sys.version_info[1]}"))
    targets = [tmp_path / "escape.txt", Path(stdlib) / f"evil_{token}.py", Path("/") / f"evil_{token}",
               Path(os.path.expanduser("~")) / f"evil_{token}"]
    code = (f"import os\nfor p in {[str(t) for t in targets]!r}:\n    try:\n        open(p, 'w').write('x')\n"
            "        print('WROTE', p)\n    except OSError as exc:\n        print('DENIED', p, exc.strerror)\n"
            f"open('/tmp/coevo-escape-{token}', 'w').write('x')\nprint('SCRATCH', os.listdir('/tmp'))\n")
    obs = run_python(code).observation()
    assert "WROTE" not in obs and obs.count("DENIED") == len(targets), obs
    assert "Read-only file system" in obs or "Permission denied" in obs
    assert f"SCRATCH ['coevo-escape-{token}']" in obs  # the scratch directory is the child's /tmp ...
    assert not any(t.exists() for t in targets)
    assert not Path(f"/tmp/coevo-escape-{token}").exists()  # ... not the host's


def _processes_named(name: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == name:
                found.append(pid)
        except OSError:
            pass
    return found


def _none_left(name: str, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while _processes_named(name):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_fork_bomb_is_capped_and_its_processes_die_with_the_call():
    name = "bomb" + uuid.uuid4().hex[:8]
    code = (f"import ctypes, os, time\nctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\nn = 0\n"
            "try:\n    while True:\n        if os.fork() == 0:\n            time.sleep(60)\n            os._exit(0)\n"
            "        n += 1\nexcept OSError as exc:\n    print('fork refused after', n, type(exc).__name__)\n")
    result = run_python(code, timeout_s=20)
    assert result.exit_code == 0 and "fork refused after" in result.stdout, result.observation()
    assert int(result.stdout.split()[3]) < PROCESS_LIMIT and "BlockingIOError" in result.stdout
    assert _none_left(name)  # the sleeping children died with the PID namespace, not 60 s later


def test_a_fork_bomb_that_escapes_its_session_is_killed_at_the_timeout():
    name = "bomb" + uuid.uuid4().hex[:8]
    code = (f"import ctypes, os\nctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\nwhile True:\n"
            "    try:\n        if os.fork() == 0:\n            os.setsid()\n    except OSError:\n        pass\n")
    started = time.perf_counter()
    result = run_python(code, timeout_s=2)
    assert result.timed_out and result.observation().startswith("TIMEOUT")
    assert time.perf_counter() - started < 15 and _none_left(name)


def test_filling_the_disk_stops_at_the_scratch_cap():
    code = ("n = 0\ntry:\n    while True:\n        with open(f'/tmp/f{n}', 'wb') as f:\n"
            "            f.write(b'x' * 1024 * 1024)\n        n += 1\n"
            "except OSError as exc:\n    print('disk full after', n, 'MiB:', exc.strerror)\n")
    result = run_python(code, scratch_mb=8)
    assert result.exit_code == 0 and "No space left on device" in result.stdout, result.observation()
    assert int(result.stdout.split()[3]) <= 8
    big = run_python("open('/tmp/big', 'wb').write(b'x' * 20 * 1024 * 1024)", scratch_mb=64)
    assert "OSError: [Errno 27] File too large" in big.observation()  # one file past 8 MiB: RLIMIT_FSIZE


def test_sockets_reach_nothing(tmp_path):
    abstract = "\0coevo-" + uuid.uuid4().hex
    servers = [socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX), socket.socket()]
    servers[0].bind(abstract)
    servers[1].bind(str(tmp_path / "s.sock"))
    servers[2].bind(("127.0.0.1", 0))
    for s in servers:
        s.listen(1)
        s.setblocking(False)
    port = servers[2].getsockname()[1]
    attempts = [("AF_UNIX", abstract), ("AF_UNIX", str(tmp_path / "s.sock")), ("AF_INET", ("127.0.0.1", port)),
                ("AF_INET", ("1.1.1.1", 53))]
    code = (f"import socket\nfor fam, addr in {attempts!r}:\n    s = socket.socket(getattr(socket, fam))\n"
            "    s.settimeout(2)\n    try:\n        s.connect(addr)\n        print('CONNECTED', fam)\n"
            "    except OSError as exc:\n        print('DENIED', fam, type(exc).__name__)\n")
    try:
        obs = run_python(code).observation()
        for s in servers:
            with pytest.raises(BlockingIOError):
                s.accept()
    finally:
        for s in servers:
            s.close()
    assert "CONNECTED" not in obs and obs.count("DENIED") == len(attempts), obs


def test_readable_paths_are_read_only_and_must_exist(tmp_path):
    data = tmp_path / "table.csv"
    data.write_text("a,b\n1,2\n")
    tool = python_tool(readable=[str(data)])
    obs = tool.fn(code=f"print(open({str(data)!r}).read())\nopen({str(data)!r}, 'w')")
    assert "a,b" in obs and "Read-only file system" in obs
    assert data.read_text() == "a,b\n1,2\n"
    with pytest.raises(ValueError, match="do not exist"):
        run_python("pass", readable=[str(tmp_path / "missing")])
