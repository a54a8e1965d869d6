"""The GPU check's inputs (``benchmarks/gpu_check.py``, ``benchmarks/gpu_wheels.txt``): bad settings are refused
before any model is built, with the way out; the shapes have their published sizes; the wheel list pins the
versions this venv runs, so a dependency bump shows up here rather than on a GPU host."""

import importlib.util
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "benchmarks" / "gpu_check.py"


def check_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def gpu_check():
    saved = list(sys.path)  # the script puts benchmarks/ on sys.path for its siblings
    spec = importlib.util.spec_from_file_location("gpu_check", CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.path[:] = saved
    return module


def test_an_unknown_shape_is_refused_naming_the_known_ones():
    proc = check_cli("--shape", "gpt-5", "--device", "cpu")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "unknown shape 'gpt-5'" in proc.stderr
    assert all(name in proc.stderr for name in ("qwen2.5-1.5b", "smollm2-135m", "tiny"))


def test_cuda_without_a_device_is_refused_with_the_cpu_smoke_as_the_way_out():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible here")
    proc = check_cli("--shape", "tiny", "--device", "cuda")
    assert proc.returncode == 2
    assert "no CUDA device is visible" in proc.stderr and "--device cpu --shape tiny" in proc.stderr


def test_a_tokenizer_folder_without_a_tokenizer_is_refused(tmp_path):
    proc = check_cli("--shape", "tiny", "--device", "cpu", "--tokenizer", str(tmp_path))
    assert proc.returncode == 2 and "holds no tokenizer" in proc.stderr and "--export-tokenizer" in proc.stderr


def test_the_shapes_have_their_published_parameter_counts(gpu_check):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    def counts(shape: str) -> tuple[int, int]:
        fields = gpu_check.shape_fields(shape)
        config = AutoConfig.for_model(fields.pop("model_type"), **fields)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        total = sum(p.numel() for p in model.parameters())
        return total, total - model.get_input_embeddings().weight.numel()

    assert counts("smollm2-135m")[0] == 134_515_008  # SmolLM2-135M, tied embeddings
    total, body = counts("qwen2.5-1.5b")  # the model card: 1.54B, 1.31B without embeddings
    assert round(total / 1e9, 2) == 1.54 and round(body / 1e9, 2) == 1.31
    with pytest.raises(gpu_check.CheckError, match="unknown shape"):
        gpu_check.shape_fields("llama-70b")


def test_the_wheel_list_pins_the_versions_this_venv_runs():
    lines = [line.split("#")[0].strip() for line in (ROOT / "benchmarks" / "gpu_wheels.txt").read_text().splitlines()]
    pins = dict(line.split("==") for line in lines if line)
    assert {"trl", "datasets", "langgraph", "langchain-core", "pydantic", "transformers"} <= set(pins)
    assert "litellm" not in pins and "sqlmodel" not in pins  # the stage imports neither
    assert {name: version(name) for name in pins} == pins
