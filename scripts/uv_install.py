"""``python scripts/uv_install.py PIP-INSTALL-ARGS``: ``pip install PIP-INSTALL-ARGS`` done by uv, with this
machine's pip settings (used by scripts/setup.sh, which falls back to pip when this exits non-zero).

uv (PyPI's ``uv``, installed into the venv by setup.sh) resolves and unpacks in parallel: on the 2-core box it
set up the tests' ~300 packages from a cold cache in 48 s where pip took 94 s, and both gave the same versions.
But uv reads no pip configuration (no ``pip.conf``, no ``PIP_*`` variables: uv's docs, "Compatibility with
pip"), so on a machine whose pip is told where packages lie (an index of its own, extra indexes, a folder of
wheels such as a CPU build of torch, a constraints file) uv alone would look elsewhere. This asks pip itself
which of its install options its configuration files and ``PIP_*`` variables set (pip's own option parser,
with pip's precedence: ``pip_settings``) and hands them over:

    index_url -> --index-url        extra_index_urls -> --extra-index-url (each)
    find_links -> --find-links (each)    constraints -> --constraint (each)    no_index -> --no-index
    cert -> SSL_CERT_FILE (when unset)   timeout -> UV_HTTP_TIMEOUT

with ``--index-strategy unsafe-best-match`` (pip's rule: the best version across every index, not the first
index that has the package). Settings that change nothing about what is installed (the version check,
progress, caching, quiet/verbose, root warnings) are left out. Any other setting (``only_binary``, ``pre``,
``trusted_hosts``, ``proxy``, ...) exits 3 naming it, before uv runs, and setup.sh installs with pip. uv's own
configuration is not read (``--no-config``; ``UV_*`` variables other than ``UV_CACHE_DIR`` are dropped), so
uv sees the same indexes and constraints as pip; its resolver may still choose differently where several
versions satisfy them (pre-releases, tie-breaks). uv's exit status is passed on.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from typing import Any

REPEATED = {"extra_index_urls": "--extra-index-url", "find_links": "--find-links", "constraints": "--constraint"}
"""pip install options holding a list -> the uv flag given once per value."""
HARMLESS = {"disable_pip_version_check", "progress_bar", "cache_dir", "retries", "verbose", "quiet",
            "root_user_action", "warn_script_location", "compile", "no_input", "require_venv"}
"""pip install options that do not change which packages are installed."""
KEPT_UV = {"UV_CACHE_DIR"}
"""uv variables passed on (where uv keeps its cache changes nothing it installs)."""


def pip_settings() -> dict[str, Any]:
    """The pip install options that pip's configuration files and ``PIP_*`` variables set, as pip resolves
    them (its ``ConfigOptionParser``: the later source wins), by option name (``find_links``, ...): those
    whose value differs from pip's built-in default. Uses pip's internal API (``pip._internal``); any failure
    there propagates, and ``main`` exits 3."""
    from pip._internal.commands import create_command

    command = create_command("install")
    options, _ = command.parse_args([])
    defaults = command.parser.defaults
    return {name: value for name, value in vars(options).items() if value != defaults.get(name, value)}


def uv_arguments(found: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """uv arguments and environment variables for pip options ``found`` (``pip_settings``). Raises
    ``ValueError`` naming an option uv cannot be given."""
    args, env = ["--index-strategy", "unsafe-best-match"], {}
    for name, value in found.items():
        if name in REPEATED:
            for item in value:
                args += [REPEATED[name], str(item)]
        elif name == "index_url":
            args += ["--index-url", str(value)]
        elif name == "no_index":
            if value:
                args.append("--no-index")
        elif name == "cert":
            env["SSL_CERT_FILE"] = str(value)
        elif name == "timeout":
            env["UV_HTTP_TIMEOUT"] = str(int(value))
        elif name not in HARMLESS:
            raise ValueError(f"pip setting {name!r} (= {value!r}) has no uv equivalent here")
    return args, env


def main(pip_args: list[str]) -> int:
    if importlib.util.find_spec("uv") is None:
        print("uv_install: uv is not installed in this environment", file=sys.stderr)
        return 3
    try:
        args, extra = uv_arguments(pip_settings())
    except Exception as err:  # pip's internal API moved, or a setting uv cannot take: pip installs instead
        print(f"uv_install: {err}", file=sys.stderr)
        return 3
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_") or k in KEPT_UV}
    for key, value in extra.items():
        env.setdefault(key, value)  # an SSL_CERT_FILE already set stays
    command = [sys.executable, "-m", "uv", "pip", "install", "--no-config", "--quiet", "--python", sys.executable,
               *args, *pip_args]
    return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
