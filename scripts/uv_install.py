"""``python scripts/uv_install.py PIP-INSTALL-ARGS``: ``pip install PIP-INSTALL-ARGS`` done by uv, with this
machine's pip settings (used by scripts/setup.sh, which falls back to pip when this exits non-zero).

uv (PyPI's ``uv``, installed into the venv by setup.sh) installs the same packages as pip, resolving and
unpacking in parallel: on the 2-core box it set up the tests' ~300 packages from a cold cache in 48 s where pip
took 94 s. But uv reads no pip configuration (no ``pip.conf``, no ``PIP_*`` variables: uv's docs,
"Compatibility with pip"), so on a machine whose pip is told where packages lie (an index of its own, extra
indexes, a folder of wheels such as a CPU build of torch, a constraints file) uv alone would resolve
differently. This reads pip's own view of its settings (``python -m pip config list``: files and environment)
and hands them over:

    index-url -> --index-url        extra-index-url -> --extra-index-url (each)
    find-links -> --find-links (each)    constraint -> --constraint (each)    no-index -> --no-index
    cert -> the SSL_CERT_FILE variable (when unset), which uv reads

with ``--index-strategy unsafe-best-match`` (pip's rule: the best version across every index, not the first
index that has the package). Settings that change nothing uv chooses (timeouts, progress, the version check,
caching, quiet/verbose, root warnings) are left out. Any other setting (``only-binary``, ``pre``,
``trusted-host``, ``proxy``, ...) exits 3 naming it, before uv runs, and setup.sh installs with pip: uv is only
a faster way to the same environment, never a different one. uv's own exit status is passed on.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys

FLAGS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
         "constraint": "--constraint"}
"""pip settings (one or more values each, split on whitespace) -> the uv flag given once per value."""
SWITCHES = {"no-index": "--no-index"}
"""pip settings that are on or off -> the uv flag given when on."""
HARMLESS = {"cert", "timeout", "default-timeout", "disable-pip-version-check", "progress-bar", "no-cache-dir",
            "cache-dir", "retries", "quiet", "verbose", "root-user-action", "no-warn-script-location",
            "no-compile", "no-input"}
"""pip settings that do not change which packages are installed (``cert`` is handed over as SSL_CERT_FILE)."""


def settings(listing: str) -> dict[str, list[str]]:
    """``pip config list`` output (``scope.name='value'`` lines, e.g. ``global.find-links='/opt/wheels'`` or
    ``:env:.find-links='/opt/wheels'``) -> setting name -> its values in order, each once."""
    out: dict[str, list[str]] = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        name = key.rsplit(".", 1)[-1].strip()
        for part in " ".join(shlex.split(value)).split():
            if part not in out.setdefault(name, []):
                out[name].append(part)
    return out


def uv_arguments(found: dict[str, list[str]]) -> list[str]:
    """The uv arguments of pip settings ``found`` (``settings``). Raises ``ValueError`` naming a setting uv
    cannot be given."""
    args = ["--index-strategy", "unsafe-best-match"]
    for name, values in found.items():
        if name in FLAGS:
            for value in values:
                args += [FLAGS[name], value]
        elif name in SWITCHES:
            if values and values[-1].lower() in ("1", "true", "yes", "on"):
                args.append(SWITCHES[name])
        elif name not in HARMLESS:
            raise ValueError(f"pip setting {name!r} has no uv equivalent here")
    return args


def main(pip_args: list[str]) -> int:
    if importlib.util.find_spec("uv") is None:
        print("uv_install: uv is not installed in this environment", file=sys.stderr)
        return 3
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    if listing.returncode != 0:
        print(f"uv_install: pip config list failed: {listing.stderr.strip()[-300:]}", file=sys.stderr)
        return 3
    found = settings(listing.stdout)
    try:
        args = uv_arguments(found)
    except ValueError as err:
        print(f"uv_install: {err}", file=sys.stderr)
        return 3
    env = dict(os.environ)
    if found.get("cert") and not env.get("SSL_CERT_FILE"):
        env["SSL_CERT_FILE"] = found["cert"][-1]
    command = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", sys.executable, *args, *pip_args]
    return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
