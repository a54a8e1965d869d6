"""The GPU check's CPU smoke (``benchmarks/gpu_check.py --device cpu --shape tiny``): the script that runs on a
GPU host keeps running here. A random tiny Llama with the bundled SmolLM2 tokenizer (no weights loaded), two
steps of coevo's GRPO stage and of TRL's ``GRPOTrainer``, one JSON with the same fields the GPU run reports."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from model_kit import needs_smollm2

pytestmark = [pytest.mark.integration, needs_smollm2()]
ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_check_runs_on_cpu_and_reports_both_trainers(tmp_path):
    out = tmp_path / "check.json"
    steps, tasks, k, limit = 2, 1, 2, 4
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu", "--shape", "tiny",
         "--steps", str(steps), "--tasks-per-step", str(tasks), "--num-generations", str(k),
         "--max-new-tokens", str(limit), "--work", str(tmp_path / "work"), "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"})  # 2 shared cores: one thread avoids oversubscription stalls
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)  # stdout holds the JSON alone (TRL's logs go to stderr)
    assert json.loads(out.read_text()) == result

    assert "random" in result["note"] and "not quality" in result["note"]
    assert result["device"] == "cpu" and result["precision"] == "float32"
    assert result["model"]["shape"] == "tiny" and result["model"]["architecture"] == "LlamaForCausalLM"
    assert result["model"]["parameters"] == 3_219_776 and result["model"]["tokenizer_tokens"] == 49152
    settings = result["settings"]
    assert (settings["steps"], settings["tasks_per_step"], settings["num_generations"]) == (steps, tasks, k)
    assert settings["lora_r"] == 16 and settings["max_new_tokens"] == limit and settings["resample"] == 0
    for name in ("coevo", "trl"):
        run = result[name]
        assert run["steps"] == steps and len(run["step_s"]) == steps, name
        assert run["s_per_step"] == pytest.approx(run["step_s"][1], abs=1e-3), name  # steady state: step 2
        assert run["first_step_s"] == run["step_s"][0] and 0 < sum(run["step_s"]) <= run["train_s"] + 0.01, name
        assert run["rollouts"] == steps * tasks * k, name
        assert 0 < run["sampled_tokens"] <= run["rollouts"] * limit, name
        assert run["sampled_tokens_per_s"] == pytest.approx(run["sampled_tokens"] / sum(run["step_s"]), rel=0.01)
        assert run["peak_gpu_memory_gib"] is None, name
    assert result["coevo"]["sampler_tokens_per_s"] > 0
    ratio = result["coevo_over_trl"]
    assert ratio["s_per_step"] == pytest.approx(result["coevo"]["s_per_step"] / result["trl"]["s_per_step"], rel=0.01)
    assert ratio["peak_gpu_memory"] is None
    assert result["versions"]["trl"] and result["versions"]["transformers"]
    assert (tmp_path / "work" / "random-tiny" / "config.json").is_file()
