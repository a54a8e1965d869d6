"""GPU check: coevo's GRPO weight stage against TRL's own ``GRPOTrainer``, on a randomly initialised model.

For a bare GPU host (torch, transformers, peft and accelerate installed; everything else carried as
the wheels of ``benchmarks/gpu_wheels.txt``; no network, no model weights): ``benchmarks/gpu_check.sh``
installs the wheels and runs this script once per shape. It

1. builds a **randomly initialised** causal LM of a named shape (``SHAPES``: the published
   ``config.json`` values of SmolLM2-135M-Instruct and Qwen2.5-1.5B-Instruct, and a ``tiny`` one for
   CPU), with the bundled SmolLM2 tokenizer, and saves it as a checkpoint directory;
2. runs coevo's GRPO stage on it (``coevo.training.grpo.stage.train_grpo``, through
   ``bench_stage.coevo_stage``: rollouts through the harness graph and the live-weights sampler), the
   default job's stage (``stage_kit.default_stage``: showcase price look-ups under H0) with K rollouts
   per task, LoRA r, dynamic sampling off;
3. runs TRL's ``GRPOTrainer`` with its own generation (``model.generate``) on the same prompts (the
   harness's opening messages), model, group size, steps, LoRA, learning rate, temperature and token
   limit (``bench_stage.trl_stage``);
4. prints one JSON object (and writes it to ``--out``): per trainer the seconds per optimiser step
   (steady state: steps 2.., the first step apart), sampled tokens and tokens/s, peak GPU memory
   (``torch.cuda.max_memory_allocated``; None on CPU), and the coevo/TRL ratios.

On CUDA both trainers run bf16 mixed precision (``coevo.training.grpo.stage.grpo_args``: ``bf16=True`` when
the device supports it) over float32 master weights, as a coevo stage does on a GPU. Random weights
measure speed and memory, not quality: rewards are noise, and a random model rarely stops early, so
nearly every completion runs to the token limit. The Qwen2.5 shape keeps its own 151,936-row
vocabulary (embedding and LM-head memory as published) while the prompts are SmolLM2-tokenised: ids
the tokenizer lacks decode to nothing.

    python benchmarks/gpu_check.py --shape smollm2-135m --out gpu_check_smollm2.json     # on a GPU host
    python benchmarks/gpu_check.py --device cpu --shape tiny --steps 2 --tasks-per-step 1 \\
        --num-generations 2 --max-new-tokens 8                                           # the CPU smoke
    python benchmarks/gpu_check.py --export-tokenizer .gpu/tokenizer   # the tokenizer that travels
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

for _key, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                     "TOKENIZERS_PARALLELISM": "false", "TRL_EXPERIMENTAL_SILENCE": "1"}.items():
    os.environ.setdefault(_key, _value)
sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
NOTE = ("randomly initialised weights: these numbers measure speed and memory, not quality (rewards are noise, "
        "and completions run to the token limit)")

# Architecture fields of each shape (transformers ``AutoConfig.for_model`` keyword arguments). The
# token ids (bos, eos, pad) come from the tokenizer; dropout is 0 in both published configs.
SHAPES: dict[str, dict[str, Any]] = {
    # HuggingFaceTB/SmolLM2-135M-Instruct config.json (the bundled model's own)
    "smollm2-135m": {"model_type": "llama", "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
                     "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
                     "max_position_embeddings": 8192, "rope_theta": 100000.0, "rms_norm_eps": 1e-5,
                     "hidden_act": "silu", "tie_word_embeddings": True},
    # Qwen/Qwen2.5-1.5B-Instruct config.json
    "qwen2.5-1.5b": {"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
                     "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
                     "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                     "hidden_act": "silu", "tie_word_embeddings": True, "use_sliding_window": False,
                     "sliding_window": 32768, "max_window_layers": 21},
    # for the CPU smoke: SmolLM2's vocabulary, two narrow layers
    "tiny": {"model_type": "llama", "vocab_size": 49152, "hidden_size": 64, "intermediate_size": 128,
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
             "max_position_embeddings": 8192, "rope_theta": 100000.0, "rms_norm_eps": 1e-5,
             "hidden_act": "silu", "tie_word_embeddings": True},
}


class CheckError(ValueError):
    """A setting of the check that cannot run (unknown shape, no CUDA device, no tokenizer); the message
    says what to change."""


def shape_fields(name: str) -> dict[str, Any]:
    """The architecture fields of shape ``name`` (a copy of ``SHAPES[name]``). Raises ``CheckError``
    naming the known shapes when ``name`` is not one."""
    if name not in SHAPES:
        raise CheckError(f"unknown shape {name!r}: the check builds a randomly initialised model of one of "
                         f"{', '.join(sorted(SHAPES))} (configs in benchmarks/gpu_check.py, SHAPES); pass --shape with "
                         "one of them, or add the published config.json fields of another model there")
    return dict(SHAPES[name])


def check_device(device: str) -> None:
    """Raise ``CheckError`` unless ``device`` ("cuda" or "cpu") can run here: "cuda" needs
    ``torch.cuda.is_available()``."""
    import torch

    if device not in ("cuda", "cpu"):
        raise CheckError(f"unknown device {device!r}: pass --device cuda (a GPU host) or --device cpu")
    if device == "cuda" and not torch.cuda.is_available():
        build = f"torch {torch.__version__}, CUDA build {torch.version.cuda or 'none (a CPU-only build)'}"
        raise CheckError(f"--device cuda, but no CUDA device is visible to torch ({build}): run the check on a GPU "
                         "host (benchmarks/gpu_check.sh), or pass --device cpu --shape tiny for the CPU smoke")


def tokenizer_dir(given: str | Path | None) -> Path:
    """The folder of the bundled SmolLM2 tokenizer: ``given`` when set (e.g. ``.gpu/tokenizer``, made by
    ``--export-tokenizer``), else the converted SmolLM2-135M-Instruct cache
    (``coevo.models.smollm2.ensure_smollm2``; only its tokenizer files are read). Raises
    ``CheckError`` when ``given`` holds no tokenizer, or when it is unset and the cache can neither be
    found nor made."""
    if given is not None:
        path = Path(given).expanduser()
        if not (path / "tokenizer_config.json").is_file():
            raise CheckError(f"--tokenizer {str(path)!r} holds no tokenizer (no tokenizer_config.json): pass the "
                             "folder written by `python benchmarks/gpu_check.py --export-tokenizer DIR` (gpu_check.sh "
                             "prepare writes .gpu/tokenizer), or leave --tokenizer out to read the SmolLM2 cache")
        return path
    from coevo.models.smollm2 import SmolLM2NotInstalledError, ensure_smollm2

    try:
        return ensure_smollm2()
    except (SmolLM2NotInstalledError, ImportError) as err:
        raise CheckError(f"no tokenizer: the SmolLM2 cache is missing and cannot be made here ({err}); pass "
                         "--tokenizer DIR with the folder that `gpu_check.sh prepare` exported") from None


def export_tokenizer(dest: str | Path, source: str | Path | None = None) -> Path:
    """Save the bundled SmolLM2 tokenizer (from ``tokenizer_dir(source)``) into ``dest``, the few MB
    that travel to a GPU host in place of the model cache; returns ``dest``."""
    from transformers import AutoTokenizer

    dest = Path(dest)
    AutoTokenizer.from_pretrained(str(tokenizer_dir(source))).save_pretrained(str(dest))
    return dest


def random_checkpoint(shape: str, tokenizer: Path, dest: Path, device: str, seed: int = 0) -> dict[str, Any]:
    """Save a randomly initialised causal LM of ``shape`` (seeded by ``seed``; built on ``device``,
    saved in bfloat16 on CUDA, else float32) with the tokenizer from ``tokenizer`` into ``dest``, a
    checkpoint directory that ``coevo.training.checkpoint.load_policy`` reads. Returns the model's
    description: architecture, parameter count, vocabulary and tokenizer sizes. Raises ``CheckError``
    for an unknown shape or a vocabulary smaller than the tokenizer's."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    fields = shape_fields(shape)
    tok = AutoTokenizer.from_pretrained(str(tokenizer))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if fields["vocab_size"] < len(tok):
        raise CheckError(f"shape {shape!r} has vocab_size {fields['vocab_size']} but the tokenizer has {len(tok)} "
                         "tokens: raise the shape's vocab_size to at least the tokenizer's")
    config = AutoConfig.for_model(fields.pop("model_type"), **fields, bos_token_id=tok.bos_token_id,
                                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    info = {"shape": shape, "architecture": type(model).__name__,
            "parameters": sum(p.numel() for p in model.parameters()), "vocab_size": config.vocab_size,
            "tokenizer_tokens": len(tok), "init_seed": seed}
    model.save_pretrained(str(dest))
    tok.save_pretrained(str(dest))
    del model
    free_memory(device)
    return info


def free_memory(device: str) -> None:
    """Collect garbage and, on CUDA, return cached blocks and reset the peak-memory counter."""
    gc.collect()
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def step_timer(device: str) -> Any:
    """A transformers ``TrainerCallback`` whose ``seconds`` lists each optimiser step's wall seconds
    (from the end of the previous step, or the start of training; generation included), the GPU
    synchronised at each step's end on CUDA."""
    import torch
    from transformers import TrainerCallback

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self._last = 0.0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            sync()
            self._last = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            sync()
            now = time.perf_counter()
            self.seconds.append(now - self._last)
            self._last = now

    return StepTimer()


def measured(run: dict[str, Any], seconds: list[float], device: str) -> dict[str, Any]:
    """One trainer's figures from its ``run`` (``train_s``, ``rollouts``, ``sampled_tokens``) and its
    step times: ``s_per_step`` (mean of steps 2.., or the one step), ``first_step_s``, ``step_s``,
    ``sampled_tokens_per_s`` (sampled tokens / the steps' seconds) and ``peak_gpu_memory_gib``
    (``torch.cuda.max_memory_allocated`` since the last reset; None on CPU)."""
    import torch

    steady = seconds[1:] or seconds
    total = sum(seconds) or run["train_s"]
    out = {"train_s": round(run["train_s"], 3), "steps": len(seconds),
           "s_per_step": round(sum(steady) / len(steady), 4) if steady else None,
           "first_step_s": round(seconds[0], 3) if seconds else None, "step_s": [round(s, 3) for s in seconds],
           "rollouts": run["rollouts"], "sampled_tokens": run["sampled_tokens"],
           "sampled_tokens_per_s": round(run["sampled_tokens"] / total, 2) if total else None,
           "peak_gpu_memory_gib": (round(torch.cuda.max_memory_allocated() / 2**30, 3) if device == "cuda" else None)}
    if "sampled_tokens_per_s" in run:  # coevo's own rate: sampled tokens over the sampler's seconds only
        out["sampler_tokens_per_s"] = round(run["sampled_tokens_per_s"], 2)
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` to 3 decimals, None when either is missing or ``b`` is 0."""
    return round(a / b, 3) if a is not None and b else None


def versions() -> dict[str, str | None]:
    """Python, torch (with its CUDA build), transformers, TRL, peft, accelerate and the coevo commit."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    found: dict[str, str | None] = {"python": platform.python_version(), "torch": torch.__version__,
                                    "cuda": torch.version.cuda}
    for name in ("transformers", "trl", "peft", "accelerate", "datasets"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    try:
        found["coevo_commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], check=True,
                                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        found["coevo_commit"] = None
    return found


def run_check(shape: str, device: str, steps: int = 8, tasks_per_step: int = 4, num_generations: int = 8,
              lora_r: int = 16, max_new_tokens: int = 64, tokenizer: str | Path | None = None,
              work: str | Path | None = None, seed: int = 0) -> dict[str, Any]:
    """Run the check (module docstring) and return its JSON-ready result. ``work`` holds the random
    checkpoint and the adapters (default: a temporary folder, removed after). Raises ``CheckError`` for
    an unknown shape, an unusable device or a missing tokenizer, ``StageConfigError`` for bad stage
    settings (e.g. ``num_generations < 2``)."""
    shape_fields(shape)
    check_device(device)
    tok = tokenizer_dir(tokenizer)
    from bench_stage import coevo_stage, trl_stage
    from stage_kit import default_stage

    with contextlib.ExitStack() as stack:
        root = Path(work) if work else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gpu_check-")))
        root.mkdir(parents=True, exist_ok=True)
        os.environ["COEVO_BENCH_OUT"] = str(root)  # the stages' adapters (stage_kit.default_stage)
        started = time.perf_counter()
        model = random_checkpoint(shape, tok, root / f"random-{shape}", device, seed)
        model["build_s"] = round(time.perf_counter() - started, 2)
        stage = default_stage(0, steps, base_model=str(root / f"random-{shape}"), tasks_per_step=tasks_per_step,
                              num_generations=num_generations, lora_r=lora_r, lora_alpha=2 * lora_r,
                              max_new_tokens=max_new_tokens, resample=0, use_cpu=device == "cpu")
        results = {}
        with contextlib.redirect_stdout(sys.stderr):  # TRL's step logs; stdout carries the JSON alone
            for name, run in (("coevo", coevo_stage), ("trl", trl_stage)):
                free_memory(device)
                timer = step_timer(device)
                out = run(stage, callbacks=[timer])
                out.pop("trajectories", None)
                results[name] = measured(out, timer.seconds, device)
    import torch

    cfg, spec = stage["config"], stage["spec"]
    coevo, trl = results["coevo"], results["trl"]
    return {
        "check": "gpu_check", "note": NOTE, "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
        "precision": ("bf16 mixed precision, float32 master weights" if device == "cuda"
                      and torch.cuda.is_bf16_supported() else "float32"),
        "model": model,
        "settings": {"steps": cfg.steps, "tasks_per_step": cfg.tasks_per_step, "num_generations": cfg.num_generations,
                     "lora_r": cfg.lora_r, "lora_alpha": cfg.lora_alpha, "learning_rate": cfg.learning_rate,
                     "temperature": spec.decoding.temperature, "max_new_tokens": spec.budget.max_output_tokens,
                     "env": stage["run"].env.ref, "harness": spec.name, "tasks": len(stage["tasks"]),
                     "resample": cfg.resample, "pack_prefixes": cfg.pack_prefixes,
                     "activation_checkpointing": cfg.activation_checkpointing, "merge_sampler": cfg.merge_sampler},
        "coevo": coevo, "trl": trl,
        "coevo_over_trl": {"s_per_step": ratio(coevo["s_per_step"], trl["s_per_step"]),
                           "sampled_tokens_per_s": ratio(coevo["sampled_tokens_per_s"], trl["sampled_tokens_per_s"]),
                           "peak_gpu_memory": ratio(coevo["peak_gpu_memory_gib"], trl["peak_gpu_memory_gib"])},
        "target": "coevo_over_trl.s_per_step <= 1.0",
        "versions": versions(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="smollm2-135m", help=f"model shape: {', '.join(SHAPES)}")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--steps", type=int, default=8, help="optimiser steps of each trainer")
    parser.add_argument("--tasks-per-step", type=int, default=4, help="tasks per step (x K rollouts)")
    parser.add_argument("--num-generations", type=int, default=8, help="group size K")
    parser.add_argument("--lora-r", type=int, default=16, help="LoRA rank (alpha = 2 r)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="completion token limit of both trainers")
    parser.add_argument("--tokenizer", help="folder of the SmolLM2 tokenizer (default: the SmolLM2 cache)")
    parser.add_argument("--work", help="folder for the random checkpoint and adapters (default: a temporary one)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--export-tokenizer", type=Path, metavar="DIR",
                        help="only save the bundled tokenizer into DIR (what gpu_check.sh prepare carries) and exit")
    args = parser.parse_args()
    try:
        if args.export_tokenizer:
            print(export_tokenizer(args.export_tokenizer, args.tokenizer))
            return
        result = run_check(args.shape, args.device, args.steps, args.tasks_per_step, args.num_generations,
                           args.lora_r, args.max_new_tokens, args.tokenizer, args.work, args.seed)
    except CheckError as err:
        parser.error(str(err))
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
