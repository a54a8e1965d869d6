"""A Python tool that runs untrusted code in a child process: a wall timeout, memory, process and
disk limits, no network, and a filesystem that holds nothing of the parent's. A runaway loop, a
crash, a fork bomb or a full disk comes back as an observation, never as a hang or an exception in
the caller.

What is enforced (each a hard limit, not a convention) when bubblewrap is installed (``isolation()``
says ``files: bwrap``):

- files: the child runs inside bubblewrap in new mount, PID, network, IPC and UTS namespaces and
  sees only the view of ``coevo.envs.sandbox_view``: the base interpreter, its standard library
  (site-packages hidden), the shared libraries they load, the ``readable`` paths a tool names, and
  one writable scratch tmpfs of ``scratch_mb`` MiB at ``/tmp`` (its working directory and ``$HOME``;
  past the cap writes fail with ``No space left on device``). Not ``$HOME``, the run's archive, the
  host's temp directory, installed packages (bfcl-eval's gold answers) nor another process's
  ``/proc`` entry (its ``/proc`` shows only its own PID namespace).
- processes: as root the child switches to an unprivileged uid of its own (one per call, no
  capabilities) with RLIMIT_NPROC = ``PROCESS_LIMIT``, so a fork bomb's forks fail with
  ``BlockingIOError``; when the call ends the PID namespace's init dies and the kernel kills every
  process left in it (a ``setsid`` cannot escape). Not as another user (RLIMIT_NPROC would count
  all that user's processes): ``isolation()["processes"]`` says ``none`` then.
- wall time: the child runs in its own session; at ``timeout_s`` the whole process group gets
  SIGKILL (and with it the namespace). RLIMIT_CPU (``timeout_s`` + 1 s) backs it up.
- memory: ``memory_mb`` bounds the whole call, every process it forks together: the parent measures
  the memory of the call's process tree every ``MEMORY_POLL_S`` (proportional set sizes, so pages a
  fork shares count once) and kills the tree when it holds more (``SandboxResult.memory_killed_mb``;
  between two measurements it can overshoot by what it allocates in ``MEMORY_POLL_S``). Each process
  also has RLIMIT_AS = ``memory_mb`` (one allocation past it raises ``MemoryError`` in the child). The
  scratch tmpfs is memory too, up to ``scratch_mb``, on top.
- output: stdout/stderr go to files the parent opened, capped by RLIMIT_FSIZE (8 MiB, as is every
  file the child writes: past it a write fails with ``File too large``, or SIGXFSZ kills a child
  that does not ignore it), cut to ``max_output_chars``.
- network: a network namespace with no interfaces up (loopback and abstract unix sockets included).
- environment: ``python -I`` (no PYTHONPATH, user site or cwd on sys.path), only PATH/LANG/HOME plus
  single-thread BLAS settings, PR_SET_NO_NEW_PRIVS.

Fallback (no ``bwrap`` on PATH, or it fails here, e.g. no user namespaces for a non-root user; a
warning is logged once, ``isolation()["files"] == "none"`` and ``"fallback"`` says why): the child
runs the caller's interpreter directly with the limits above except files and processes, in an
empty temporary working directory, with ``unshare(CLONE_NEWNET)`` when the kernel allows it (else a
``socket.socket`` stub that ctypes could bypass) and, as root, every capability dropped (so the
kernel refuses it ``/proc/<parent>/{mem,environ,maps}``) or, as another user, a new user namespace.
It can still read every file the parent's user can. Gold answers live only in the parent's memory
(never in files the env writes, env vars or argv) in both modes.

A child's exit code above 128 is read as a signal (bubblewrap reports a signal N as 128 + N, as
shells do). The limits are set inside the child by a small bootstrap before the untrusted code is
compiled (no ``preexec_fn``, which is unsafe in a threaded parent such as the async harness).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from coevo.envs.base import Tool
from coevo.envs.sandbox_view import SCRATCH, bwrap_command, find_bwrap, interpreter_view

log = logging.getLogger(__name__)

OUTPUT_FILE_LIMIT = 8 * 1024 * 1024
PROCESS_LIMIT = 64
SANDBOX_UID_BASE = 2_000_000_000  # per-call uids above any account's: RLIMIT_NPROC counts per uid
_calls = itertools.count()

_BOOTSTRAP = r"""
import ctypes, os, platform, resource, sys
mem, cpu, fsize, nproc, uid = (int(x) for x in sys.argv[1:6])
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
net = guard = files = procs = "none"
if sys.argv[6] == "view":  # inside bubblewrap: namespaces made, capabilities dropped but SETUID/SETGID as root
    net, guard, files = "netns", "pid-namespace", "bwrap"
    if os.geteuid() == 0 and uid > 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # clears every capability
        procs = "nproc"
elif os.geteuid() == 0:
    if libc.unshare(0x40000000) == 0:  # CLONE_NEWNET
        net = "netns"
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
    class _Hdr(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class _Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]
    nr = {"x86_64": 126, "aarch64": 91}.get(platform.machine())
    if nr is not None and libc.syscall(nr, ctypes.byref(_Hdr(0x20080522, 0)), (_Data * 2)()) == 0:
        guard = "no-capabilities"
elif libc.unshare(0x10000000 | 0x40000000) == 0:  # CLONE_NEWUSER | CLONE_NEWNET
    net, guard = "netns", "user-namespace"
if net != "netns":
    import socket
    def _no_net(*a, **k):
        raise OSError("network access is disabled in this sandbox")
    class _NoNet(socket.socket):
        def __init__(self, *a, **k):
            _no_net()
    socket.socket, socket.create_connection = _NoNet, _no_net
    net = "socket-stub"
resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
if sys.argv[7:8] == ["--probe"]:
    print(net, guard, files, procs)
    raise SystemExit(0)
source = sys.stdin.read()
del ctypes, os, platform, resource, sys, libc
__name__ = "__main__"
exec(compile(source, "<tool>", "exec"))
"""


@dataclass
class SandboxResult:
    """What a sandboxed run did: exit code (negative = killed by that signal), captured output (cut),
    whether the wall timeout fired, the wall time in seconds, ``memory_killed_mb`` the call's memory
    limit (MiB) when its processes together held more and were killed (else 0), and ``peak_mb`` the
    most they were measured to hold together (MiB; 0 when the call ended before the first measurement)."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float
    memory_killed_mb: int = 0
    peak_mb: int = 0

    def observation(self) -> str:
        """The text the agent sees: status line, then stdout and stderr (when non-empty)."""
        if self.timed_out:
            status = f"TIMEOUT: killed after {self.wall_s:.1f}s wall time"
        elif self.memory_killed_mb:
            status = (f"MEMORY: killed when its processes held {self.peak_mb} MB together (the limit is "
                      f"{self.memory_killed_mb} MB for the whole call)")
        elif self.exit_code < 0:
            sig = -self.exit_code
            name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
            why = {signal.SIGXCPU: " (CPU time limit)", signal.SIGXFSZ: " (file size limit)",
                   signal.SIGKILL: " (killed)"}.get(sig, "")
            status = f"CRASHED: terminated by signal {name}{why}"
        else:
            status = f"exit code {self.exit_code}"
        parts = [status]
        if self.stdout:
            parts.append("stdout:\n" + self.stdout)
        if self.stderr:
            parts.append("stderr:\n" + self.stderr)
        return "\n".join(parts)


def _read_cut(path: str, limit: int) -> str:
    with open(path, "rb") as f:
        data = f.read(limit * 4 + 4)
    text = data.decode("utf-8", errors="replace")
    if len(text) > limit:
        text = text[:limit] + f"\n[... output cut at {limit} characters]"
    return text


def _child_env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": home,
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "PYTHONDONTWRITEBYTECODE": "1"}


def _sandbox_uid() -> int:
    """A uid no account and no concurrent call of this process uses, so RLIMIT_NPROC counts only
    this call's processes."""
    return SANDBOX_UID_BASE + (os.getpid() % 100_000) * 1000 + next(_calls) % 1000


def _run(code: str, python: str, bwrap: str | None, *, timeout_s: float, memory_mb: int, max_output_chars: int,
         scratch_mb: int, readable: Sequence[str], probe: bool) -> SandboxResult:
    outdir = tempfile.mkdtemp(prefix="coevo-sbx-out-")
    workdir = None
    if bwrap:
        root = os.geteuid() == 0
        view = interpreter_view(python)
        prefix = [*bwrap_command(bwrap, view, readable=readable, scratch_mb=scratch_mb, as_root=root), view.interpreter]
        cwd, home, uid, mode = "/", SCRATCH, _sandbox_uid() if root else 0, "view"
    else:
        workdir = tempfile.mkdtemp(prefix="coevo-sbx-")
        prefix, cwd, home, uid, mode = [python], workdir, workdir, 0, "plain"
    out_path, err_path = os.path.join(outdir, "stdout"), os.path.join(outdir, "stderr")
    args = [*prefix, "-I", "-c", _BOOTSTRAP, str(memory_mb * 1024 * 1024), str(int(timeout_s) + 1),
            str(OUTPUT_FILE_LIMIT), str(PROCESS_LIMIT), str(uid), mode] + (["--probe"] if probe else [])
    started = time.perf_counter()
    try:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=cwd,
                                    env=_child_env(home), start_new_session=True, close_fds=True)
            try:
                proc.stdin.write(code.encode())  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
            except BrokenPipeError:
                pass
            code_, timed_out, peak = _watch(proc, started + timeout_s, memory_mb * 1024 * 1024)
        wall = time.perf_counter() - started
        if bwrap and code_ > 128 and code_ - 128 in signal.valid_signals():
            code_ = 128 - code_
        return SandboxResult(code_, _read_cut(out_path, max_output_chars), _read_cut(err_path, max_output_chars),
                             timed_out, wall, memory_mb if peak > memory_mb * 1024 * 1024 else 0,
                             -(-peak // (1024 * 1024)))
    finally:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(outdir, ignore_errors=True)


MEMORY_POLL_S = 0.02
"""How often (seconds) the parent measures the memory a call's processes hold together (``_watch``)."""


def _watch(proc: subprocess.Popen, deadline: float, limit: int) -> tuple[int, bool, int]:
    """Wait for ``proc`` until ``deadline`` (``time.perf_counter`` seconds), measuring every
    ``MEMORY_POLL_S`` the memory its whole process tree holds (``_tree_bytes``). At the deadline, or
    once the tree holds more than ``limit`` bytes, every process of the tree and the child's process
    group get SIGKILL. Returns ``(exit code, timed out, peak bytes held)``."""
    peak = 0
    while True:
        try:
            return proc.wait(timeout=max(0.0, min(MEMORY_POLL_S, deadline - time.perf_counter()))), False, peak
        except subprocess.TimeoutExpired:
            pass
        tree = _tree(proc.pid)
        peak = max(peak, _tree_bytes(tree))
        late = time.perf_counter() >= deadline
        if late or peak > limit:
            for pid in [proc.pid, *tree]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return proc.wait(), late, peak


def _tree(root: int) -> list[int]:
    """``root`` and every process descended from it (from each ``/proc/PID/stat``'s parent pid). A
    process the child orphaned is adopted by the sandbox's PID-namespace init, itself in the tree;
    only in the fallback (no bubblewrap) can an orphan leave it."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _tree_bytes(pids: Sequence[int]) -> int:
    """The memory ``pids`` hold together, in bytes: the sum of their proportional set sizes (``Pss``
    in ``/proc/PID/smaps_rollup``: a page shared by n processes counts 1/n to each, so forked
    children are not counted n times), or their resident sets where that file is missing."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
                total += next(int(line.split()[1]) * 1024 for line in f if line.startswith(b"Pss:"))
        except (OSError, StopIteration, ValueError, IndexError):
            try:
                with open(f"/proc/{pid}/statm", "rb") as f:
                    total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError, IndexError):
                continue
    return total


@lru_cache(maxsize=8)
def _view_for(python: str) -> tuple[str | None, str]:
    """``(bwrap path, "")`` when the filesystem view works here for ``python``, else ``(None, why)``;
    decided once per interpreter by a probe run (and logged once when it falls back)."""
    bwrap = find_bwrap()
    if bwrap is None:
        why = ("bubblewrap (bwrap) is not on PATH: install the Debian package bubblewrap "
               "(scripts/setup.sh does as root)")
    else:
        try:
            result = _run("", python, bwrap, timeout_s=30, memory_mb=512, max_output_chars=2000, scratch_mb=1,
                          readable=(), probe=True)
            why = "" if result.exit_code == 0 and "bwrap" in result.stdout else \
                f"{bwrap} could not start the sandbox here ({result.observation()[:500]})"
        except RuntimeError as exc:
            why = str(exc)
    if why:
        log.warning("python sandbox without a filesystem view (the child can read the parent's files): %s", why)
        return None, why
    return bwrap, ""


def run_python(code: str, *, timeout_s: float = 5.0, memory_mb: int = 512, max_output_chars: int = 4000,
               scratch_mb: int = 64, readable: Sequence[str] = (), filesystem_view: bool = True,
               python: str | None = None, _probe: bool = False) -> SandboxResult:
    """Run ``code`` (Python 3 source) in the sandbox described in the module doc.

    ``timeout_s`` (> 0) is the wall limit in seconds, ``memory_mb`` (>= 64) the memory limit in MiB
    of the whole call (every process it forks together) and of each process's address space,
    ``scratch_mb`` (>= 1) the size of the writable scratch directory in MiB, ``readable`` extra
    absolute paths the child may read (a task's data; never an answer file).
    ``filesystem_view=False`` runs the fallback on purpose. ``python``: the interpreter (default
    this one; in the view its base interpreter, without the venv). Never raises for anything the
    code does; raises ``ValueError`` for bad limits or a ``readable`` path that does not exist.
    """
    if timeout_s <= 0 or memory_mb < 64 or scratch_mb < 1:
        raise ValueError(f"timeout_s={timeout_s} must be > 0, memory_mb={memory_mb} >= 64 and "
                         f"scratch_mb={scratch_mb} >= 1")
    python = python or sys.executable
    bwrap = _view_for(python)[0] if filesystem_view else None
    return _run(code, python, bwrap, timeout_s=timeout_s, memory_mb=memory_mb, max_output_chars=max_output_chars,
                scratch_mb=scratch_mb, readable=readable, probe=_probe)


@lru_cache(maxsize=1)
def isolation() -> dict[str, str]:
    """What this machine lets the sandbox enforce: ``{"network": "netns" | "socket-stub", "parent":
    "pid-namespace" | "no-capabilities" | "user-namespace" | "none", "files": "bwrap" | "none",
    "processes": "nproc" | "none"}``, plus ``"fallback"`` (why) when ``files`` is ``none`` (see
    module doc)."""
    words = run_python("", timeout_s=30, _probe=True).stdout.split()
    words += ["none"] * (4 - len(words))
    found = {"network": words[0] if words[0] != "none" else "socket-stub", "parent": words[1],
             "files": words[2], "processes": words[3]}
    why = _view_for(sys.executable)[1]
    return found | ({"fallback": why} if why else {})


def python_tool(timeout_s: float = 5.0, memory_mb: int = 512, max_output_chars: int = 4000,
                scratch_mb: int = 64, readable: Sequence[str] = ()) -> Tool:
    """The ``python`` tool: runs ``code`` through ``run_python`` (same limits; ``readable``: the
    paths the task's code may read) and returns its observation text."""

    def run(code: str) -> str:
        return run_python(str(code), timeout_s=timeout_s, memory_mb=memory_mb, max_output_chars=max_output_chars,
                          scratch_mb=scratch_mb, readable=tuple(readable)).observation()

    return Tool(
        name="python",
        description=(f"Run a Python 3 program (standard library only) and see what it prints. Limits: "
                     f"{timeout_s:g}s wall time; {memory_mb} MB of memory for the whole call, all the processes "
                     f"it starts together (past it every one is killed; one allocation over {memory_mb} MB raises "
                     f"MemoryError); at most {PROCESS_LIMIT} processes; no network; a {scratch_mb} MB scratch "
                     "directory (the working directory), no files kept between calls. Use print()."),
        parameters={"type": "object", "properties": {"code": {"type": "string", "description": "Python 3 source code"}},
                    "required": ["code"]},
        fn=run, blocking=True)
