"""The filesystem a sandboxed Python child sees: a bubblewrap (``bwrap``) command line that builds a
new mount namespace holding only the interpreter, its standard library, the shared libraries they
load, the paths a task's tool names, and one size-capped writable scratch directory.

The view (every path bound read-only at its own path, so the interpreter finds its prefix as usual):

- the interpreter file (``realpath``: a venv's ``bin/python`` resolves to the base interpreter, so
  the venv, its site-packages and whatever they ship, e.g. bfcl-eval's gold answers, stay out);
- the entries of that interpreter's ``sys.path`` under ``-I -S`` (the zip, the standard library,
  ``lib-dynload``), with every site-packages directory inside them covered by an empty tmpfs;
- the shared libraries the interpreter and its extension modules link against (``ldd``; without
  ``ldd``, the system library directories), and ``/etc/ld.so.cache``;
- ``readable``: extra paths a task's tools need, read-only;
- ``/dev`` (null, zero, urandom, ...), a ``/proc`` of the child's own PID namespace, and the scratch
  directory ``SCRATCH`` (a fresh tmpfs of ``scratch_mb`` MiB, the working directory and ``$HOME``).

Nothing else exists in the child's tree: not ``$HOME``, the run's archive, the system temp directory,
``/etc``, nor another process's ``/proc`` entry. bubblewrap (Debian package ``bubblewrap``) is the
well-kept tool for this (used by Flatpak); ``scripts/setup.sh`` installs it.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

SCRATCH = "/tmp"
SYSTEM_LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
_LDD_PATH = re.compile(r"(/\S+) \(0x[0-9a-f]+\)")
_PROBE = ("import json, site, sys\n"
          "print(json.dumps({'path': [p for p in sys.path if p], 'site': site.getsitepackages()}))")


@dataclass(frozen=True)
class View:
    """What the child may read: ``binds`` (existing absolute paths, bound read-only at the same
    path) and ``masks`` (directories inside a bind hidden under an empty tmpfs)."""

    interpreter: str
    binds: tuple[str, ...]
    masks: tuple[str, ...]


def find_bwrap() -> str | None:
    """The ``bwrap`` executable on ``PATH``, or None."""
    return shutil.which("bwrap")


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _shared_libraries(files: Sequence[str]) -> list[str]:
    """The absolute paths ``ldd`` resolves for ``files`` (the loader included); the system library
    directories when ``ldd`` is missing or fails."""
    ldd = shutil.which("ldd")
    if ldd:
        try:
            out = subprocess.run([ldd, *files], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        libs = sorted({m for m in _LDD_PATH.findall(out) if os.path.exists(m)})
        if libs:
            return libs
    return [d for d in SYSTEM_LIB_DIRS if os.path.isdir(d)]


@lru_cache(maxsize=8)
def interpreter_view(python: str) -> View:
    """The read-only view for interpreter ``python`` (an executable path), computed once per
    process: runs it once with ``-I -S`` to list its standard library paths and site directories,
    then ``ldd`` on it and its extension modules. Raises ``RuntimeError`` naming the interpreter
    when it cannot be run."""
    interp = os.path.realpath(python)
    try:
        probe = subprocess.run([interp, "-I", "-S", "-c", _PROBE], capture_output=True, text=True, timeout=60)
        paths = json.loads(probe.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise RuntimeError(f"the sandbox cannot run the interpreter {interp} to list its standard library "
                           f"({exc}); pass python= an executable CPython 3") from exc
    stdlib = [os.path.abspath(p) for p in paths["path"] if os.path.exists(p)]
    extensions = [f for d in stdlib if os.path.isdir(d) for f in sorted(glob.glob(os.path.join(d, "*.so")))]
    extras = [p for p in (os.path.join(os.path.dirname(interp), "..", "pyvenv.cfg"), "/etc/ld.so.cache")
              if os.path.isfile(p)]
    binds = dict.fromkeys([interp, *stdlib, *_shared_libraries([interp, *extensions]),
                           *(os.path.realpath(p) for p in extras)])
    masks = sorted({os.path.abspath(s) for s in paths["site"]
                    if os.path.isdir(s) and _inside(os.path.abspath(s), binds)})
    return View(interp, tuple(binds), tuple(masks))


def bwrap_command(bwrap: str, view: View, *, readable: Sequence[str] = (), scratch_mb: int = 64,
                  as_root: bool = False) -> list[str]:
    """The ``bwrap`` argument list (ending in ``--``; the interpreter's arguments follow) for ``view``
    plus the ``readable`` paths, with new network, PID, IPC, UTS and cgroup namespaces, every
    capability dropped (as root, CAP_SETUID/CAP_SETGID are kept for the bootstrap to switch to an
    unprivileged uid), the child killed with its parent, and a ``scratch_mb`` MiB scratch tmpfs at
    ``SCRATCH``. Raises ``ValueError`` for a ``readable`` path that does not exist."""
    missing = [p for p in readable if not os.path.exists(p)]
    if missing:
        raise ValueError(f"readable paths {missing} do not exist: the sandbox binds only existing paths "
                         "into the child's view; pass absolute paths of files or directories the tool needs")
    cmd = [bwrap, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
           "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if as_root:
        cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    # the scratch tmpfs first: a readable path may lie under it (e.g. in the host's /tmp)
    cmd += ["--size", str(scratch_mb * 1024 * 1024), "--perms", "1777", "--tmpfs", SCRATCH]
    binds = list(dict.fromkeys([*view.binds, *(os.path.abspath(p) for p in readable)]))
    for parent in sorted({a for b in binds for a in _ancestors(b)}):
        cmd += ["--perms", "0755", "--dir", parent]  # else bwrap may copy a private mode (/root: 0700)
    for path in binds:
        cmd += ["--ro-bind", path, path]
    for path in view.masks:
        cmd += ["--tmpfs", path]
    cmd += ["--dev", "/dev", "--proc", "/proc", "--chdir", SCRATCH, "--"]
    return cmd
