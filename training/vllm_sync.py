"""GPU path: hot-load trained LoRA adapters into a running vLLM server (docs/design.md, Training).

vLLM's OpenAI-compatible server loads adapters at run time through ``POST /v1/load_lora_adapter``
(``{"lora_name", "lora_path"}``) and drops them through ``POST /v1/unload_lora_adapter`` when
started with ``--enable-lora`` and the environment variable ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``.
A loaded adapter is then a model name: coevo addresses it as ``litellm:hosted_vllm/<name>``
(``coevo.models.refs``). The server and the trainer must share the filesystem path of the adapter.

Names carry a content hash (``adapter_digest``: sha256 of the adapter's files, 12 hex): vLLM caches an
adapter by name, so an adapter saved again at the same path under the same name would be served
from the stale cache. With the hash in the name, new contents always get a new name, and loading
the same contents again is a no-op (the server's "already been loaded" counts as success).

- ``publish_checkpoint``: after a stage, load the new checkpoint's adapter under a new name.
- ``VLLMStepSync``: a ``policy_factory`` for ``train_grpo`` that syncs the adapter under training
  to vLLM before each step's rollouts, so GRPO samples on vLLM; the trainer then applies Eq. 16
  (``clip(pi_old / q, 0, 2)``) for the vLLM/transformers mismatch.

Only ``httpx`` is needed here; vLLM itself is the optional extra ``coevo[vllm]`` on the server.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

import httpx

from coevo.models.adapters import writing_adapter
from coevo.models.checkpoint import Checkpoint

ENV_FLAG = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
NOT_HASHED = frozenset({"README.md"})
"""Files of a PEFT adapter directory that vLLM does not read (PEFT's model card), left out of the hash."""


class VLLMSyncError(RuntimeError):
    """The vLLM server refused or failed an adapter load/unload."""


def _post(base_url: str, route: str, body: dict[str, Any], client: httpx.Client | None, timeout_s: float) -> None:
    url = f"{base_url.rstrip('/')}/v1/{route}"
    own = client is None
    client = client or httpx.Client(timeout=timeout_s)
    try:
        response = client.post(url, json=body)
    except httpx.HTTPError as err:
        raise VLLMSyncError(f"{route}: cannot reach the vLLM server at {base_url}: {err}") from err
    finally:
        if own:
            client.close()
    if response.status_code == 400 and route == "load_lora_adapter" and "already been loaded" in response.text:
        return  # same name, hence same contents (adapter_digest): loading it again changes nothing
    if response.status_code >= 400:
        hint = (f" (start the server with --enable-lora and {ENV_FLAG}=True)"
                if response.status_code in (404, 405) else "")
        raise VLLMSyncError(f"{route} {body.get('lora_name')!r} failed: HTTP {response.status_code} "
                            f"{response.text[:500]}{hint}")


def load_lora_adapter(base_url: str, name: str, path: str | Path, *, client: httpx.Client | None = None,
                      timeout_s: float = 120.0) -> None:
    """Load the PEFT adapter directory ``path`` into the vLLM server at ``base_url`` (e.g.
    ``http://localhost:8000``) as model ``name``. Raises ``VLLMSyncError`` on failure."""
    _post(base_url, "load_lora_adapter", {"lora_name": name, "lora_path": str(path)}, client, timeout_s)


def unload_lora_adapter(base_url: str, name: str, *, client: httpx.Client | None = None,
                        timeout_s: float = 60.0) -> None:
    """Drop adapter ``name`` from the server. Raises ``VLLMSyncError`` on failure."""
    _post(base_url, "unload_lora_adapter", {"lora_name": name}, client, timeout_s)


def adapter_digest(path: str | Path, length: int = 12) -> str:
    """The first ``length`` hex digits of the sha256 over the adapter directory ``path``: every file
    vLLM may read (all but ``NOT_HASHED``), as relative path and bytes, in sorted order. Equal
    contents give equal digests wherever they are saved. Raises ``FileNotFoundError`` naming the path
    when it holds no ``adapter_config.json``."""
    root = Path(path)
    if not (root / "adapter_config.json").is_file():
        raise FileNotFoundError(f"{str(root)!r} holds no adapter_config.json: point it at a PEFT adapter directory "
                                "(model.save_pretrained(path))")
    digest = hashlib.sha256()
    for file in sorted(f for f in root.rglob("*") if f.is_file() and f.name not in NOT_HASHED):
        digest.update(file.relative_to(root).as_posix().encode() + b"\0")
        with file.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()[:length]


def adapter_name(checkpoint: Checkpoint, prefix: str = "coevo") -> str:
    """The served name of a checkpoint's adapter: ``<prefix>-<checkpoint id>-<adapter_digest>``, so
    an adapter re-saved with other weights under the same checkpoint id gets another name. Raises
    ``ValueError`` when the checkpoint has no adapter and ``FileNotFoundError`` when its directory
    holds none."""
    if not checkpoint.adapter_path:
        raise ValueError(f"checkpoint {checkpoint.id} has no adapter_path: serve its base model by name instead")
    return f"{prefix}-{checkpoint.id}-{adapter_digest(checkpoint.adapter_path)}"


def _roots(base_url: str | Sequence[str]) -> list[str]:
    roots = [base_url] if isinstance(base_url, str) else list(base_url)
    if not roots:
        raise ValueError("name at least one vLLM server root (http://host:8000)")
    return [r.rstrip("/") for r in roots]


def served_ref(base_url: str | Sequence[str], name: str) -> str:
    """The model reference of the model ``name`` on the vLLM server(s) ``base_url`` (roots,
    ``http://host:8000``): ``litellm:hosted_vllm/<name>?api_base=<root>/v1[,<root>/v1...]``, a
    ``RouterChatModel`` across several (``coevo.models.refs``). Raises ``ValueError`` with no root."""
    return f"litellm:hosted_vllm/{name}?api_base={','.join(f'{root}/v1' for root in _roots(base_url))}"


def publish_checkpoint(checkpoint: Checkpoint, base_url: str | Sequence[str], *, name: str | None = None,
                       client: httpx.Client | None = None) -> str:
    """Load ``checkpoint``'s adapter into the vLLM server ``base_url`` (or into each of several
    roots) and return the model reference to use from then on (``litellm:hosted_vllm/<name>``; add
    ``?api_base=`` or use a ``router:`` file to call it; default name ``adapter_name(checkpoint)``,
    which carries the adapter's content hash; publishing the same contents again is a no-op).
    Raises ``ValueError`` when the checkpoint has no adapter (serve the base model by its own name)
    or no server is named, ``FileNotFoundError`` when its directory holds none, and
    ``VLLMSyncError`` when loading fails."""
    name = name or adapter_name(checkpoint)
    for root in _roots(base_url):
        load_lora_adapter(root, name, checkpoint.adapter_path, client=client)
    return f"litellm:hosted_vllm/{name}"


class VLLMStepSync:
    """``policy_factory`` for ``train_grpo``: before each step's rollouts, save the trainer's
    current adapter under ``adapter_dir/step-<n>``, load it into every vLLM server as
    ``<prefix>-step<n>-<adapter_digest>`` (unloading the previous step's), and return the policy on
    it: ``load_model(served_ref(roots, name))``, a ``LiteLLMChatModel``
    (one server) or a ``RouterChatModel`` across them, with token ids and logprobs requested. Being
    built from a reference, it reaches Ray workers by that reference (``sampling_on``).

    Under ``accelerate launch`` (several training processes) only the main process saves and
    loads; the others wait for it (``accelerator.wait_for_everyone``) and name the same adapter
    (UNVERIFIED on several GPUs: see README, GPU recipe).

    Args: ``base_url`` the server root (``http://host:8000``) or several; ``adapter_dir`` a
    directory every server can read; ``prefix`` the adapter name prefix; ``client`` an
    ``httpx.Client`` (tests pass a mock transport); ``model_kwargs`` extra model settings
    (``timeout_s``, ``cooldown_s``, ...). ``loaded`` lists the names loaded so far.
    """

    def __init__(self, base_url: str | Sequence[str], adapter_dir: str | Path, prefix: str = "coevo-grpo",
                 client: httpx.Client | None = None, **model_kwargs: Any) -> None:
        self.roots, self.adapter_dir, self.prefix = _roots(base_url), Path(adapter_dir), prefix
        self.client, self.model_kwargs = client, model_kwargs
        self.loaded: list[str] = []
        self._step: int | None = None
        self._policy: Any = None

    def _sync(self, trainer: Any, path: Path) -> None:
        """Save the trainer's adapter at ``path`` and swap it into every server (main process only)."""
        accelerator = trainer.accelerator
        if getattr(accelerator, "is_main_process", True):
            with writing_adapter(path) as partial:  # a server never reads a half-written adapter
                accelerator.unwrap_model(trainer.model).save_pretrained(str(partial))
            name = self._name(path)
            for root in self.roots:
                load_lora_adapter(root, name, path, client=self.client)
                if self.loaded and self.loaded[-1] != name:
                    unload_lora_adapter(root, self.loaded[-1], client=self.client)
        if hasattr(accelerator, "wait_for_everyone"):
            accelerator.wait_for_everyone()

    def _name(self, path: Path) -> str:
        return f"{self.prefix}-{path.name.replace('-', '')}-{adapter_digest(path)}"

    def __call__(self, trainer: Any) -> Any:
        """The policy for the trainer's current step: on a new ``trainer.state.global_step``, save and
        load that step's adapter into the servers (unloading the previous one) and build a new model
        on it; within the same step, return the same model. Raises ``VLLMSyncError`` when a server
        refuses to load or unload an adapter."""
        from coevo.models.refs import load_model

        step = int(trainer.state.global_step)
        if step != self._step:
            path = self.adapter_dir / f"step-{step}"
            self._sync(trainer, path)
            name = self._name(path)
            self.loaded.append(name)
            self._step = step
            self._policy = load_model(served_ref(self.roots, name), request_tokens=True, **self.model_kwargs)
        return self._policy
