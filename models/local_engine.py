"""The local backend's batching engine (docs/design.md, Models): one causal LM, LoRA adapters, a worker.

``LocalEngine`` owns one causal LM + tokenizer (a checkpoint path, or objects already in memory
such as the PEFT model under training), any number of named LoRA adapters sharing its base
weights, and a worker thread. Requests that arrive together (within ``batch_window_s``, or, while
callers run as ``client()``, once every client has one queued; up to ``max_batch``) are decoded
together (``coevo.models.decode``: a shared prompt prefix prefilled once, finished rows leaving
the batch), even when they ask for different adapters (PEFT mixed-adapter batches). Each row
keeps its own decoding settings (``coevo.models.sampling``), so a row's output does not depend on
what it was batched with. A row may decode under a JSON schema (``coevo.models.constrained``): its
mask runs before the sampler.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import queue
import random
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
from langchain_core.messages import BaseMessage

from coevo.models.adapters import check_adapter
from coevo.models.decode import decode
from coevo.models.loading import load_pretrained
from coevo.models.merged import MergedLora
from coevo.models.messages import messages_to_chat
from coevo.models.sampling import GenerationRequest, GenerationResult


class LocalEngine:
    """One causal LM + tokenizer + any number of LoRA adapters, serving batched requests.

    Adapters share the base weights: ``add_adapter(path)`` loads one under a name that requests
    can ask for (``GenerationRequest.adapter``), and rows that want different adapters (or the
    base, ``None``) still decode in one ``generate`` call through PEFT's mixed-adapter batches.
    ``active_adapter`` is what requests naming no adapter get (``None``: the base weights;
    ``load_adapter`` switches it).

    Args: ``model``/``tokenizer`` already loaded (e.g. the PEFT model under training, left on its
    device, whose own active adapter stays the default); ``adapter`` a PEFT adapter directory to
    load on top and make active; ``max_batch`` rows per
    ``generate`` call; ``batch_window_s`` how long the worker waits for more requests after the
    first one arrives (seconds); ``hold_s`` the longest it holds a batch for clients that have not
    submitted yet (``client``); ``share_prefix`` prefill a prompt prefix common to a batch's rows
    once; ``threads`` torch's intra-op threads in the worker thread that decodes queued requests
    (``None``: torch's default, one per core; a thread's own setting, so the caller's threads, a
    trainer's backward pass among them, keep theirs); ``name`` a label for logs and ``model_name``.
    Decoding a batch of a few short rows through a small model, one thread costs less CPU than two
    (docs/benchmarks/showcase.md: 0.18 against 0.47 CPU-s per rollout, 32 rows a batch).

    Thread-safe: ``submit`` may be called from any thread; one worker thread runs ``generate``.
    """

    def __init__(self, model: Any, tokenizer: Any, *, adapter: str | Path | None = None,
                 max_batch: int = 16, batch_window_s: float = 0.01, hold_s: float = 0.5, share_prefix: bool = True,
                 threads: int | None = None, name: str = "local"):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1 (or None: torch's default), got {threads}")
        self.threads = threads
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch = max_batch
        self.batch_window_s = batch_window_s
        self.hold_s = hold_s
        self.share_prefix = share_prefix
        self.name = name
        self._clients = 0  # callers inside client(): the worker waits for a request from each
        self.adapters: dict[str, str] = {}  # name -> directory, loaded by this engine
        self.active_adapter: str | None = _peft_active(model)
        self._pinned: set[str] = set()  # names handed out by add_adapter: never deleted by a switch
        self._lock = threading.RLock()  # the model: held while generating or changing adapters
        self._worker_lock = threading.Lock()  # starting the worker; never held while generating
        self._queue: queue.Queue[tuple[GenerationRequest, concurrent.futures.Future] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._rng = random.Random()
        self.pad_token_id = self._pad_id()
        self.eos_ids = self._eos_ids()
        self.batch_sizes: list[int] = []  # rows of each generate call, for tests and benchmarks
        self._constraints: Any = None  # SchemaConstraints, built on the first JSON-schema request
        self._merged: MergedLora | None = None  # the active adapter folded into the base weights (merged())
        self._merging = 0  # merged() blocks open
        if adapter:
            self.load_adapter(adapter)

    @classmethod
    def from_pretrained(cls, path: str | Path, *, adapter: str | Path | None = None, device: str | None = None,
                        dtype: Any = None, **kwargs: Any) -> "LocalEngine":
        """Load a checkpoint directory (see ``load_pretrained``) and wrap it in an engine."""
        model, tokenizer = load_pretrained(path, device=device, dtype=dtype)
        return cls(model, tokenizer, adapter=adapter, name=kwargs.pop("name", str(path)), **kwargs)

    # -- tokens ------------------------------------------------------------------------------

    def _pad_id(self) -> int:
        tok = self.tokenizer
        for candidate in (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id, 0):
            if candidate is not None:
                return int(candidate)
        return 0

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        for value in (eos, self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, (list, tuple)):
                ids.update(int(v) for v in value)
        return ids

    @property
    def context_length(self) -> int | None:
        """The model's maximum sequence length in tokens (``max_position_embeddings``), if known."""
        value = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        return int(value) if isinstance(value, int) else None

    @property
    def supports_tool_template(self) -> bool:
        """True when the tokenizer's chat template reads a ``tools`` variable."""
        template = getattr(self.tokenizer, "chat_template", None) or ""
        if isinstance(template, dict):
            template = " ".join(template.values())
        return "tools" in template

    def render(self, messages: Sequence[BaseMessage], tools: list[dict] | None = None) -> list[int]:
        """Token ids of ``messages`` under the chat template with the generation prompt appended.

        ``tools`` (OpenAI function schemas) are passed to the template as ``tools=``; templates
        that ignore them are unaffected. Raises ``ValueError`` when the tokenizer has no chat
        template.
        """
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"tokenizer of {self.name!r} has no chat_template: set tokenizer.chat_template")
        kwargs = {"tools": tools} if tools else {}
        text = self.tokenizer.apply_chat_template(
            messages_to_chat(messages), add_generation_prompt=True, tokenize=False, **kwargs)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # -- adapters ----------------------------------------------------------------------------

    @property
    def adapter_path(self) -> str | None:
        """Directory of the active adapter (``None``: base weights, or an adapter not loaded here)."""
        return self.adapters.get(self.active_adapter) if self.active_adapter else None

    def _load(self, path: str | Path) -> str:
        from peft import PeftModel

        path = Path(path).expanduser().resolve()
        check_adapter(path)  # a missing or damaged file: CheckpointError naming it, not a library's traceback
        stamp = max(f.stat().st_mtime_ns for f in path.iterdir() if f.is_file())
        name = "coevo_" + hashlib.sha1(f"{path}:{stamp}".encode()).hexdigest()[:10]
        if name in self.adapters:
            return name
        if isinstance(self.model, PeftModel):
            self.model.load_adapter(str(path), adapter_name=name, is_trainable=False)
        else:
            self.model = PeftModel.from_pretrained(self.model, str(path), adapter_name=name, is_trainable=False)
        self.model.eval()
        self.adapters[name] = str(path)
        return name

    def add_adapter(self, path: str | Path) -> str:
        """Load the PEFT LoRA adapter at ``path`` (once per directory and file contents) and
        return its name, for ``GenerationRequest.adapter`` / ``LocalChatModel.adapter``. The
        active adapter is unchanged. Raises ``coevo.models.adapters.CheckpointError`` for a missing or
        damaged adapter file (``MissingAdapterError``, a ``FileNotFoundError``, when one is missing).
        """
        with self._lock:
            name = self._load(path)
            self._pinned.add(name)
            return name

    def load_adapter(self, path: str | Path) -> None:
        """Load the adapter at ``path`` and make it the active one (what requests naming no
        adapter get). The adapter made active by the previous ``load_adapter`` is unloaded unless
        ``add_adapter`` handed it out. A directory re-saved since it was loaded is read again.

        Waits for the running batch. Raises ``coevo.models.adapters.CheckpointError`` for a missing or
        damaged adapter file (``MissingAdapterError``, a ``FileNotFoundError``, when one is missing).
        """
        with self._lock:
            old = self.active_adapter
            name = self._load(path)
            self.model.set_adapter(name)
            self.active_adapter = name
            if old in self.adapters and old != name and old not in self._pinned:
                self.model.delete_adapter(old)
                del self.adapters[old]

    @property
    def constraints(self) -> Any:
        """This engine's ``coevo.models.constrained.SchemaConstraints`` (built on first use): compiles
        and checks a request's ``json_schema`` (``constraints.grammar(schema)``, ``ValueError`` when
        it cannot) and masks the constrained rows of a batch."""
        if self._constraints is None:
            from coevo.models.constrained import SchemaConstraints

            vocab = getattr(getattr(self.model, "config", None), "vocab_size", None) or len(self.tokenizer)
            self._constraints = SchemaConstraints(self.tokenizer, vocab, self.eos_ids)
        return self._constraints

    @contextlib.contextmanager
    def merged(self) -> Iterator[None]:
        """Decode with the active LoRA adapter merged into the base weights while the block runs
        (``coevo.models.merged.MergedLora``: one matmul per layer instead of the base and adapter
        paths; logits equal up to floating-point summation order). The caller promises that the
        adapter's weights do not change inside the block (a GRPO step's rollouts): they are merged once,
        at the block's first batch, and the model's own weights are swapped in again after each batch.
        Batches with a row on another adapter or the base weights decode unmerged. A no-op for a plain
        model or an adapter that cannot be merged exactly. Nestable; waits for the running batch."""
        with self._lock:
            active = _peft_active(self.model)
            if self._merged is None or self._merged.model is not self.model or self._merged.adapter != active:
                self._merged = MergedLora(self.model)
            if not self._merging:
                self._merged.fresh = False  # the adapter may have changed since the last block
            self._merging += 1
        try:
            yield
        finally:
            with self._lock:
                self._merging -= 1

    # -- batching ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def client(self) -> Iterator[None]:
        """Count the caller as a client while the block runs: a batch is started as soon as every
        client has a request queued (or ``max_batch`` are, or after ``hold_s``), rather than
        ``batch_window_s`` after its first request. Callers that submit in bursts (a GRPO step's
        rollouts, each a client from start to end) then share one ``generate`` call per turn even
        when rendering their prompts takes longer than the window. Thread-safe; nestable."""
        with self._worker_lock:
            self._clients += 1
        try:
            yield
        finally:
            with self._worker_lock:
                self._clients -= 1

    def submit(self, request: GenerationRequest) -> concurrent.futures.Future:
        """Queue ``request``; the returned future resolves to a ``GenerationResult``."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._ensure_worker()
        self._queue.put((request, future))
        return future

    def _ensure_worker(self) -> None:
        with self._worker_lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._serve, name=f"coevo-local-{self.name}", daemon=True)
                self._worker.start()

    def _serve(self) -> None:
        if self.threads:
            torch.set_num_threads(self.threads)  # this thread's own setting (OpenMP's is per thread)
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = self._gather(item)
            live = [(req, fut) for req, fut in batch if fut.set_running_or_notify_cancel()]
            if not live:
                continue
            try:
                results = self.generate_batch([req for req, _ in live])
            except BaseException as exc:  # hand every caller the failure, keep serving
                for _, fut in live:
                    fut.set_exception(exc)
                continue
            for (_, fut), result in zip(live, results):
                fut.set_result(result)

    def _gather(self, first: tuple[GenerationRequest, concurrent.futures.Future]) -> list[Any]:
        """``first`` and the requests that join it: up to ``max_batch``, until every client has one
        queued (``hold_s`` at most) or, without clients, until ``batch_window_s`` has passed."""
        batch, started = [first], _now()
        while len(batch) < self.max_batch:
            clients = self._clients
            if clients and len(batch) >= clients:
                break
            left = started + (self.hold_s if clients else self.batch_window_s) - _now()
            try:  # with clients, look again every 5 ms: one may end without another request
                nxt = self._queue.get(timeout=min(left, 0.005) if clients else left) if left > 0 \
                    else self._queue.get_nowait()
            except queue.Empty:
                if left > 0 and clients:
                    continue
                break
            if nxt is None:
                self._queue.put(None)
                break
            batch.append(nxt)
        return batch

    def close(self) -> None:
        """Stop the worker thread after the queued requests and free the merged weights (idempotent)."""
        if self._worker is not None and self._worker.is_alive():
            self._queue.put(None)
            self._worker.join(timeout=60)
        with self._lock:
            if not self._merging:
                self._merged = None

    # -- decoding ----------------------------------------------------------------------------

    def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Decode ``requests`` together (blocking; ``coevo.models.decode``: a shared prompt prefix
        prefilled once, finished rows leaving the batch).

        Returns one ``GenerationResult`` per request, in order. Each row's tokens depend only on
        its own prompt and settings (see ``RowSampler``), so results equal one-at-a-time calls
        up to floating-point effects of batching.
        """
        if not requests:
            return []
        with self._lock:
            self.batch_sizes.append(len(requests))
            model = self.model
            routing, names = self._adapter_routing(requests)
            was_training = model.training
            model.eval()
            try:
                merge = self._merged.swapped() if self._merging and names is None and self._merged \
                    and self._merged.adapter == _peft_active(model) and _is_null(routing) else contextlib.nullcontext()
                with torch.inference_mode(), routing, merge:  # no autograd state: faster small ops, same values
                    schema_mask = self.constraints.processor(requests)  # None when no row asks for a JSON schema
                    sampler, stopper = decode(model, requests, pad_id=self.pad_token_id, eos_ids=self.eos_ids,
                                              tokenizer=self.tokenizer, rng=self._rng, adapter_names=names,
                                              share_prefix=self.share_prefix,
                                              processors=[schema_mask] if schema_mask is not None else ())
            finally:
                if was_training:
                    model.train()
        return [GenerationResult(prompt_token_ids=list(req.prompt_ids), completion_token_ids=sampler.tokens[row],
                                 logprobs=sampler.logprobs[row], text=self._text(sampler.tokens[row], req.stop),
                                 finish_reason=stopper.reasons[row])
                for row, req in enumerate(requests)]

    def _adapter_routing(self, requests: Sequence[GenerationRequest]) -> tuple[Any, list[str] | None]:
        """How to run each row on its adapter: ``(context manager, PEFT adapter_names per row or None)``."""
        names = [r.adapter if r.adapter is not None else self.active_adapter for r in requests]
        loaded = getattr(self.model, "peft_config", {})
        missing = sorted({n for n in names if n is not None and n not in loaded})
        if missing:
            raise KeyError(f"adapters {missing} are not loaded in engine {self.name!r}: use add_adapter(path)")
        if set(names) == {None}:
            return (self.model.disable_adapter() if loaded else contextlib.nullcontext()), None
        if len(set(names)) == 1:  # one adapter for the whole batch: make it PEFT's active one, no per-row routing
            if names[0] != _peft_active(self.model):  # (PEFT's mixed-batch path costs ~3x a plain forward on CPU)
                self.model.set_adapter(names[0], inference_mode=True)
            return contextlib.nullcontext(), None
        return contextlib.nullcontext(), [n or "__base__" for n in names]

    def _text(self, completion: list[int], stops: list[str]) -> str:
        body = completion[:-1] if completion and completion[-1] in self.eos_ids else completion
        text = self.tokenizer.decode(body, skip_special_tokens=False)
        cuts = [text.find(s) for s in stops if s and s in text]
        return text[: min(cuts)] if cuts else text


def _peft_active(model: Any) -> str | None:
    """The PEFT active adapter of ``model`` (``None`` for a plain model)."""
    if getattr(model, "peft_config", None) is None:
        return None
    active = model.active_adapter
    return active if isinstance(active, str) else (active[0] if active else None)


def _is_null(context: Any) -> bool:
    return isinstance(context, contextlib.nullcontext)


def _now() -> float:
    return time.monotonic()
