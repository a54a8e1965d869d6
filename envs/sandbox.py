"""A Python tool that runs untrusted code in a child process: a wall timeout, a memory limit, no
network, and nothing of the parent's to read. A runaway loop, a crash or a memory blow-up comes back
as an observation, never as a hang or an exception in the caller.

What is enforced (each a hard limit, not a convention):

- wall time: the child runs in its own session; at ``timeout_s`` the whole process group gets
  SIGKILL. RLIMIT_CPU (``timeout_s`` + 1 s) backs it up.
- memory: RLIMIT_AS = ``memory_mb`` (allocations past it raise ``MemoryError`` in the child).
- output: stdout/stderr go to files capped by RLIMIT_FSIZE (8 MiB; past it the child dies with
  SIGXFSZ) and are cut to ``max_output_chars`` in the observation.
- network: the child calls ``unshare(CLONE_NEWNET)`` before the code runs (a fresh network
  namespace with no interfaces up, loopback included) when the kernel allows it (root or user
  namespaces); otherwise it falls back to replacing ``socket.socket`` by a stub that raises — a
  convention that code using ctypes could bypass. ``network_isolation()`` says which applies here.
- the parent's secrets: the child starts with ``python -I`` (no PYTHONPATH, no user site, no cwd on
  sys.path), an environment of only PATH/LANG/HOME plus single-thread BLAS settings, an empty
  temporary working directory (deleted afterwards; output files live elsewhere), and
  PR_SET_NO_NEW_PRIVS. As root it drops every capability (bounding set and capset), so the kernel
  refuses it ``/proc/<parent>/{mem,environ,maps}`` and ptrace of the parent; as another user it
  enters a new user namespace, with the same effect. Gold answers live only in the parent's memory
  (never in files, env vars or argv).

The limits are set inside the child by a small bootstrap before the untrusted code is compiled (no
``preexec_fn``, which is unsafe in a threaded parent such as the async harness).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache

from coevo.envs.base import Tool

OUTPUT_FILE_LIMIT = 8 * 1024 * 1024

_BOOTSTRAP = r"""
import ctypes, os, platform, resource, sys
mem, cpu, fsize = (int(x) for x in sys.argv[1:4])
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
net = guard = "none"
if os.geteuid() == 0:
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
if sys.argv[4:5] == ["--probe"]:
    print(net, guard)
    raise SystemExit(0)
source = sys.stdin.read()
del ctypes, os, platform, resource, sys, libc
__name__ = "__main__"
exec(compile(source, "<tool>", "exec"))
"""


@dataclass
class SandboxResult:
    """What a sandboxed run did: exit code (negative = killed by that signal), captured output (cut),
    whether the wall timeout fired, and the wall time in seconds."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float

    def observation(self) -> str:
        """The text the agent sees: status line, then stdout and stderr (when non-empty)."""
        if self.timed_out:
            status = f"TIMEOUT: killed after {self.wall_s:.1f}s wall time"
        elif self.exit_code < 0:
            sig = -self.exit_code
            name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
            why = {signal.SIGXCPU: " (CPU time limit)", signal.SIGXFSZ: " (output size limit)",
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


def run_python(code: str, *, timeout_s: float = 5.0, memory_mb: int = 512, max_output_chars: int = 4000,
               python: str | None = None, _probe: bool = False) -> SandboxResult:
    """Run ``code`` (Python 3 source) in the sandbox described in the module doc.

    ``timeout_s`` (> 0) is the wall limit in seconds, ``memory_mb`` (>= 64) the address-space
    limit in MiB. Never raises for anything the code does; raises ``ValueError`` for bad limits.
    """
    if timeout_s <= 0 or memory_mb < 64:
        raise ValueError(f"timeout_s={timeout_s} must be > 0 and memory_mb={memory_mb} >= 64")
    workdir = tempfile.mkdtemp(prefix="coevo-sbx-")
    outdir = tempfile.mkdtemp(prefix="coevo-sbx-out-")
    out_path, err_path = os.path.join(outdir, "stdout"), os.path.join(outdir, "stderr")
    args = [python or sys.executable, "-I", "-c", _BOOTSTRAP, str(memory_mb * 1024 * 1024),
            str(int(timeout_s) + 1), str(OUTPUT_FILE_LIMIT)] + (["--probe"] if _probe else [])
    started = time.perf_counter()
    timed_out = False
    try:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=workdir,
                                    env=_child_env(workdir), start_new_session=True, close_fds=True)
            try:
                proc.stdin.write(code.encode())  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
            except BrokenPipeError:
                pass
            try:
                code_ = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                code_ = proc.wait()
        wall = time.perf_counter() - started
        return SandboxResult(code_, _read_cut(out_path, max_output_chars), _read_cut(err_path, max_output_chars),
                             timed_out, wall)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(outdir, ignore_errors=True)


@lru_cache(maxsize=1)
def isolation() -> dict[str, str]:
    """What this machine's kernel lets the sandbox enforce: ``{"network": "netns" | "socket-stub",
    "parent": "no-capabilities" | "user-namespace" | "none"}`` (see module doc)."""
    words = run_python("", timeout_s=10, _probe=True).stdout.split()
    return {"network": words[0] if words else "socket-stub", "parent": words[1] if len(words) > 1 else "none"}


def python_tool(timeout_s: float = 5.0, memory_mb: int = 512, max_output_chars: int = 4000) -> Tool:
    """The ``python`` tool: runs ``code`` through ``run_python`` and returns its observation text."""

    def run(code: str) -> str:
        return run_python(str(code), timeout_s=timeout_s, memory_mb=memory_mb,
                          max_output_chars=max_output_chars).observation()

    return Tool(
        name="python",
        description=(f"Run a Python 3 program and see what it prints. Limits: {timeout_s:g}s wall time, "
                     f"{memory_mb} MB memory, no network, no files kept between calls. Use print()."),
        parameters={"type": "object", "properties": {"code": {"type": "string", "description": "Python 3 source code"}},
                    "required": ["code"]},
        fn=run, blocking=True)
