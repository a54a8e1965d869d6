"""Local transformers policy (DESIGN.md, Models): batching, LoRA adapters, token ids and logprobs.

``LocalEngine`` owns one causal LM + tokenizer (a checkpoint path, or objects already in memory
such as the PEFT model under training), any number of named LoRA adapters sharing its base
weights, and a worker thread. Requests that arrive together (within ``batch_window_s``, up to
``max_batch``) are decoded together in one left-padded ``generate`` call, even when they ask for
different adapters (PEFT mixed-adapter batches). Each row keeps its own decoding settings: a ``LogitsProcessor`` picks every row's next
token itself (argmax when ``temperature == 0``, else temperature + top-p sampling from a
per-row ``torch.Generator`` seeded with the request's seed) and records the token's logprob
under that row's sampling distribution; ``generate`` then follows the pick. So a row's output
does not depend on what it was batched with, and batched greedy equals unbatched greedy.

``LocalChatModel`` is the LangChain ``BaseChatModel`` face of an engine: it renders the chat
template (passing bound tool schemas through ``tools=``), honours stop strings, ``max_tokens``,
``temperature``/``top_p``/``seed``, and returns an ``AIMessage`` whose
``response_metadata[TOKENS_KEY]`` holds ``prompt_token_ids``, ``completion_token_ids`` and
``logprobs`` (see ``coevo.models.base``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import queue
import random
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from coevo.models.base import TOKENS_KEY

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "chat": "user"}
_TOOL_CALL_RE = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


# --- loading ---------------------------------------------------------------------------------


def default_device() -> str:
    """``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_pretrained(path: str | Path, device: str | None = None, dtype: Any = None) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` from a local transformers checkpoint directory.

    ``device`` defaults to ``default_device()``; ``dtype`` (``torch.dtype`` or its name, e.g.
    ``"bfloat16"``) defaults to the checkpoint's dtype (``"auto"``). Raises
    ``FileNotFoundError`` when ``path`` is not a directory with a ``config.json``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model path {str(path)!r} is not a transformers checkpoint (no config.json): pass a "
            "directory saved with save_pretrained, or 'smollm2-135m' for the default policy"
        )
    if isinstance(dtype, str):
        dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype or "auto")
    model.to(device or default_device())
    model.eval()
    return model, tokenizer


# --- requests and results --------------------------------------------------------------------


@dataclass
class GenerationRequest:
    """One completion to decode. ``prompt_ids``: the templated prompt's token ids (unpadded);
    ``temperature == 0`` means greedy; ``seed`` ``None`` means a fresh random seed; ``stop``:
    strings that end the completion (excluded from the text, kept in the token ids); ``adapter`` a
    name from ``LocalEngine.add_adapter`` (``None``: the engine's active adapter)."""

    prompt_ids: list[int]
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    adapter: str | None = None

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError("GenerationRequest.prompt_ids is empty: the rendered prompt has no tokens")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass
class GenerationResult:
    """A decoded completion: ``completion_token_ids`` (including a final EOS or stop-string
    tokens when generated), ``logprobs`` (same length, natural log, under the row's sampling
    distribution), ``text`` (EOS and stop string removed), ``finish_reason`` ``"stop"`` or
    ``"length"``."""

    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str


class _RowSampler(LogitsProcessor):
    """Choose each row's next token with that row's own settings and record its logprob.

    Greedy rows (temperature 0) take the argmax of the raw logits and record its logprob under
    ``softmax(logits)``; sampling rows draw from ``softmax(logits / T)`` restricted to the top-p
    nucleus (renormalised), from their own ``torch.Generator``. Returns scores that are ``-inf``
    everywhere but the chosen token, so ``generate``'s argmax follows the choice.
    """

    def __init__(self, requests: Sequence[GenerationRequest], device: torch.device, rng: random.Random):
        self.temps = torch.tensor([r.temperature for r in requests], dtype=torch.float32, device=device)
        self.top_p = torch.tensor([r.top_p for r in requests], dtype=torch.float32, device=device)
        self.sampled = [r.temperature > 0 for r in requests]
        self.generators: list[torch.Generator | None] = []
        for r in requests:
            if r.temperature > 0:
                g = torch.Generator(device=device)
                g.manual_seed(r.seed if r.seed is not None else rng.getrandbits(63))
                self.generators.append(g)
            else:
                self.generators.append(None)
        self.tokens: list[torch.Tensor] = []  # one (B,) tensor per step
        self.logprobs: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scores = scores.float()
        chosen = scores.argmax(dim=-1)
        logp = torch.log_softmax(scores, dim=-1)
        if any(self.sampled):
            temps = torch.where(self.temps > 0, self.temps, torch.ones_like(self.temps))
            warped = scores / temps[:, None]
            sorted_logits, order = warped.sort(dim=-1, descending=True)
            probs = sorted_logits.softmax(dim=-1)
            outside = (probs.cumsum(dim=-1) - probs) >= self.top_p[:, None]  # keeps >= 1 token
            sorted_logits = sorted_logits.masked_fill(outside, float("-inf"))
            warped = torch.full_like(warped, float("-inf")).scatter(-1, order, sorted_logits)
            warped_logp = torch.log_softmax(warped, dim=-1)
            for row, generator in enumerate(self.generators):
                if generator is not None:
                    probs_row = warped_logp[row].exp()
                    chosen[row] = torch.multinomial(probs_row, 1, generator=generator)[0]
                    logp[row] = warped_logp[row]
        self.tokens.append(chosen.clone())
        self.logprobs.append(logp.gather(-1, chosen[:, None])[:, 0])
        out = torch.full_like(scores, float("-inf"))
        return out.scatter(-1, chosen[:, None], 0.0)


class _RowStop(StoppingCriteria):
    """Per-row end: EOS, a stop string completed in the row's text, or its own ``max_tokens``.

    Records for each row the number of generated tokens it keeps (``ends``) and why.
    """

    def __init__(self, requests: Sequence[GenerationRequest], prompt_width: int, eos_ids: set[int], tokenizer: Any):
        self.requests = list(requests)
        self.width = prompt_width
        self.eos_ids = eos_ids
        self.tokenizer = tokenizer
        self.ends: list[int | None] = [None] * len(requests)
        self.reasons: list[str] = ["length"] * len(requests)

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        n = input_ids.shape[1] - self.width
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        last = input_ids[:, -1].tolist()
        for row, req in enumerate(self.requests):
            if self.ends[row] is not None:
                done[row] = True
                continue
            if last[row] in self.eos_ids:
                self.ends[row], self.reasons[row] = n, "stop"
            elif req.stop and self._hit_stop(input_ids[row, self.width:], req.stop):
                self.ends[row], self.reasons[row] = n, "stop"
            elif n >= req.max_tokens:
                self.ends[row] = n
            done[row] = self.ends[row] is not None
        return done

    def _hit_stop(self, generated: torch.Tensor, stops: list[str]) -> bool:
        window = max(len(s) for s in stops) + 2  # every token decodes to >= 1 character
        tail = self.tokenizer.decode(generated[-window:].tolist(), skip_special_tokens=False)
        return any(s in tail for s in stops)


# --- the engine ------------------------------------------------------------------------------


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
    first one arrives (seconds); ``name`` a label for logs and ``model_name``.

    Thread-safe: ``submit`` may be called from any thread; one worker thread runs ``generate``.
    """

    def __init__(self, model: Any, tokenizer: Any, *, adapter: str | Path | None = None,
                 max_batch: int = 16, batch_window_s: float = 0.01, name: str = "local"):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch = max_batch
        self.batch_window_s = batch_window_s
        self.name = name
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
        if not (path / "adapter_config.json").is_file():
            raise FileNotFoundError(f"adapter path {str(path)!r} has no adapter_config.json: pass a PEFT "
                                    "adapter directory saved with save_pretrained")
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
        active adapter is unchanged. Raises ``FileNotFoundError`` without ``adapter_config.json``.
        """
        with self._lock:
            name = self._load(path)
            self._pinned.add(name)
            return name

    def load_adapter(self, path: str | Path) -> None:
        """Load the adapter at ``path`` and make it the active one (what requests naming no
        adapter get). The adapter made active by the previous ``load_adapter`` is unloaded unless
        ``add_adapter`` handed it out. A directory re-saved since it was loaded is read again.

        Waits for the running batch. Raises ``FileNotFoundError`` without ``adapter_config.json``.
        """
        with self._lock:
            old = self.active_adapter
            name = self._load(path)
            self.model.set_adapter(name)
            self.active_adapter = name
            if old in self.adapters and old != name and old not in self._pinned:
                self.model.delete_adapter(old)
                del self.adapters[old]

    # -- batching ----------------------------------------------------------------------------

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
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            deadline = _now() + self.batch_window_s
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get(timeout=max(0.0, deadline - _now())) if _now() < deadline \
                        else self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                batch.append(nxt)
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

    def close(self) -> None:
        """Stop the worker thread after the queued requests (idempotent)."""
        if self._worker is not None and self._worker.is_alive():
            self._queue.put(None)
            self._worker.join(timeout=60)

    # -- decoding ----------------------------------------------------------------------------

    def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Decode ``requests`` together in one left-padded ``generate`` call (blocking).

        Returns one ``GenerationResult`` per request, in order. Each row's tokens depend only on
        its own prompt and settings (see ``_RowSampler``), so results equal one-at-a-time calls
        up to floating-point effects of padding.
        """
        if not requests:
            return []
        with self._lock:
            self.batch_sizes.append(len(requests))
            model = self.model
            device = next(model.parameters()).device
            width = max(len(r.prompt_ids) for r in requests)
            ids = torch.full((len(requests), width), self.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(requests), width), dtype=torch.long)
            for row, req in enumerate(requests):
                ids[row, width - len(req.prompt_ids):] = torch.tensor(req.prompt_ids, dtype=torch.long)
                mask[row, width - len(req.prompt_ids):] = 1
            sampler = _RowSampler(requests, device, self._rng)
            stopper = _RowStop(requests, width, self.eos_ids, self.tokenizer)
            config = GenerationConfig(
                do_sample=False, max_new_tokens=max(r.max_tokens for r in requests),
                pad_token_id=self.pad_token_id, eos_token_id=sorted(self.eos_ids) or None,
                temperature=None, top_p=None, top_k=None, use_cache=True)
            routing, extra = self._adapter_routing(requests)
            was_training = model.training
            model.eval()
            try:
                with torch.no_grad(), routing:
                    model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config,
                                   logits_processor=LogitsProcessorList([sampler]),
                                   stopping_criteria=StoppingCriteriaList([stopper]), **extra)
            finally:
                if was_training:
                    model.train()
        tokens = torch.stack(sampler.tokens, dim=1).tolist() if sampler.tokens else [[] for _ in requests]
        logprobs = torch.stack(sampler.logprobs, dim=1).tolist() if sampler.logprobs else [[] for _ in requests]
        results = []
        for row, req in enumerate(requests):
            n = stopper.ends[row] if stopper.ends[row] is not None else min(req.max_tokens, len(tokens[row]))
            completion = [int(t) for t in tokens[row][:n]]
            results.append(GenerationResult(
                prompt_token_ids=list(req.prompt_ids), completion_token_ids=completion,
                logprobs=[float(x) for x in logprobs[row][:n]],
                text=self._text(completion, req.stop), finish_reason=stopper.reasons[row]))
        return results

    def _adapter_routing(self, requests: Sequence[GenerationRequest]) -> tuple[Any, dict[str, Any]]:
        """How to run each row on its adapter: ``(context manager, extra generate kwargs)``."""
        names = [r.adapter if r.adapter is not None else self.active_adapter for r in requests]
        loaded = getattr(self.model, "peft_config", {})
        missing = sorted({n for n in names if n is not None and n not in loaded})
        if missing:
            raise KeyError(f"adapters {missing} are not loaded in engine {self.name!r}: use add_adapter(path)")
        if set(names) == {None}:
            return (self.model.disable_adapter() if loaded else contextlib.nullcontext()), {}
        if set(names) == {_peft_active(self.model)}:
            return contextlib.nullcontext(), {}
        return contextlib.nullcontext(), {"adapter_names": [n or "__base__" for n in names]}

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


def _now() -> float:
    return time.monotonic()


# --- message and tool conversion ---------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def messages_to_chat(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages -> chat-template dicts ``{"role", "content"[, "tool_calls", ...]}``.

    AI tool calls become OpenAI-style ``tool_calls`` (arguments as a dict, which HF templates
    expect); tool results get role ``tool`` with ``tool_call_id`` and ``name``.
    """
    chat: list[dict[str, Any]] = []
    for m in messages:
        role = _ROLES.get(m.type)
        if role is None:
            raise ValueError(f"cannot render message of type {m.type!r} into a chat template")
        entry: dict[str, Any] = {"role": role, "content": _text_of(m.content)}
        if isinstance(m, AIMessage) and m.tool_calls:
            entry["tool_calls"] = [{"id": c.get("id"), "type": "function",
                                    "function": {"name": c["name"], "arguments": c.get("args", {})}}
                                   for c in m.tool_calls]
        if isinstance(m, ToolMessage):
            entry["tool_call_id"] = m.tool_call_id
            if m.name:
                entry["name"] = m.name
        chat.append(entry)
    return chat


def tool_schema(tool: Any) -> dict[str, Any]:
    """OpenAI function schema ``{"type": "function", "function": {...}}`` of a coevo ``Tool``,
    a schema dict, a LangChain tool, a pydantic model or a function."""
    if isinstance(tool, dict) and tool.get("type") == "function":
        return tool
    from coevo.envs.base import Tool

    if isinstance(tool, Tool):
        return tool.schema()
    return convert_to_openai_tool(tool)


def parse_tool_calls(text: str) -> list[dict[str, Any]]:
    """LangChain tool calls from Hermes/Qwen-style ``<tool_call>{"name", "arguments"}</tool_call>``
    blocks in ``text``; blocks that are not valid JSON with a ``name`` are skipped."""
    calls = []
    for match in _TOOL_CALL_RE.finditer(text):
        try:
            body = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            continue
        args = body.get("arguments", body.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                continue
        if isinstance(args, dict):
            calls.append({"name": body["name"], "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"})
    return calls


# --- the chat model ------------------------------------------------------------------------------


class LocalChatModel(BaseChatModel):
    """A LangChain chat model served by a ``LocalEngine`` (batched, LoRA, token ids + logprobs).

    Fields are the default decoding settings; ``invoke``/``bind`` keyword arguments
    (``temperature``, ``top_p``, ``seed``, ``max_tokens``, ``stop``, ``tools``) override them per
    call. ``temperature == 0`` is greedy. ``adapter`` is an adapter name on the engine (from
    ``engine.add_adapter(path)``; ``None``: the engine's active adapter). Several
    ``LocalChatModel`` may share one engine (``bind_tools`` returns a copy that does), with
    different adapters; their concurrent requests batch together.

    Build with ``LocalChatModel.from_pretrained(path, adapter=...)`` or
    ``LocalChatModel.from_model(model, tokenizer)`` for objects already in memory.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: LocalEngine = Field(exclude=True)
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int | None = None
    stop: list[str] | None = None
    tools: list[dict[str, Any]] | None = None
    adapter: str | None = None
    parse_tool_calls: bool = True
    """Map ``<tool_call>{...}</tool_call>`` blocks in the reply to ``AIMessage.tool_calls`` when tools are bound."""

    @classmethod
    def from_pretrained(cls, path: str | Path, *, adapter: str | Path | None = None, device: str | None = None,
                        dtype: Any = None, max_batch: int = 16, batch_window_s: float = 0.01,
                        **decoding: Any) -> "LocalChatModel":
        """Load a checkpoint directory (+ optional adapter) into a new engine."""
        engine = LocalEngine.from_pretrained(path, adapter=adapter, device=device, dtype=dtype,
                                             max_batch=max_batch, batch_window_s=batch_window_s)
        return cls(engine=engine, **decoding)

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, *, adapter: str | Path | None = None, max_batch: int = 16,
                   batch_window_s: float = 0.01, name: str = "local", **decoding: Any) -> "LocalChatModel":
        """Wrap an already-loaded model and tokenizer (e.g. the PEFT model under training)."""
        engine = LocalEngine(model, tokenizer, adapter=adapter, max_batch=max_batch,
                             batch_window_s=batch_window_s, name=name)
        return cls(engine=engine, **decoding)

    @property
    def _llm_type(self) -> str:
        return "coevo-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.engine.name, "adapter": self.adapter_path,
                "temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}

    @property
    def adapter_path(self) -> str | None:
        """Directory of the adapter this model's requests run on (``None``: base weights)."""
        return self.engine.adapters.get(self.adapter) if self.adapter else self.engine.adapter_path

    def load_adapter(self, path: str | Path) -> None:
        """Switch the engine's active LoRA adapter (see ``LocalEngine.load_adapter``); affects every
        chat model sharing this engine that names no adapter of its own."""
        self.engine.load_adapter(path)

    def with_adapter(self, path: str | Path) -> "LocalChatModel":
        """A copy on the same engine whose requests run on the adapter at ``path`` (loaded once,
        sharing the base weights); requests of both batch together."""
        return self.model_copy(update={"adapter": self.engine.add_adapter(path)})

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """A copy (same engine) that renders ``tools`` into the chat template via ``tools=``.

        ``tool_choice`` is accepted and ignored (a local model cannot be forced); other keyword
        arguments (e.g. LangChain's ``ls_structured_output_format``) are bound to every call. Whether the
        template uses the schemas is ``engine.supports_tool_template``; the harness also renders
        tools into the prompt text.
        """
        copy = self.model_copy(update={"tools": [tool_schema(t) for t in tools]})
        return copy.bind(**kwargs) if kwargs else copy

    def _request(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]) -> GenerationRequest:
        unknown = set(kwargs) - {"temperature", "top_p", "seed", "max_tokens", "stop", "tools", "tool_choice"}
        if unknown:
            raise TypeError(f"LocalChatModel got unsupported call arguments {sorted(unknown)}")
        tools = kwargs.get("tools")
        tools = [tool_schema(t) for t in tools] if tools else self.tools
        temperature = kwargs.get("temperature")
        top_p = kwargs.get("top_p")
        max_tokens = kwargs.get("max_tokens")
        if self.adapter is not None and self.adapter not in self.engine.adapters:
            raise KeyError(f"adapter {self.adapter!r} is not loaded in engine {self.engine.name!r}: "
                           "use engine.add_adapter(path) or with_adapter(path)")
        prompt_ids = self.engine.render(messages, tools)
        limit = self.engine.context_length
        if limit is not None and len(prompt_ids) >= limit:
            raise ValueError(f"prompt of {len(prompt_ids)} tokens does not fit the context of {self.engine.name!r} "
                             f"({limit} tokens): shorten the history or lower the harness's context budget")
        return GenerationRequest(
            prompt_ids=prompt_ids,
            max_tokens=int(max_tokens if max_tokens is not None else self.max_tokens),
            temperature=float(temperature if temperature is not None else self.temperature),
            top_p=float(top_p if top_p is not None else self.top_p),
            seed=kwargs.get("seed", self.seed),
            stop=list(stop or kwargs.get("stop") or self.stop or []),
            adapter=self.adapter)

    def _result(self, result: GenerationResult, tools_bound: bool) -> ChatResult:
        tool_calls = parse_tool_calls(result.text) if tools_bound and self.parse_tool_calls else []
        message = AIMessage(
            content=result.text,
            tool_calls=tool_calls,
            response_metadata={
                TOKENS_KEY: {"prompt_token_ids": result.prompt_token_ids,
                             "completion_token_ids": result.completion_token_ids,
                             "logprobs": result.logprobs},
                "finish_reason": result.finish_reason,
                "model_name": self.engine.name,
                "adapter": self.adapter_path,
            },
            usage_metadata={"input_tokens": len(result.prompt_token_ids),
                            "output_tokens": len(result.completion_token_ids),
                            "total_tokens": len(result.prompt_token_ids) + len(result.completion_token_ids)},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        request = self._request(messages, stop, kwargs)
        result = self.engine.submit(request).result()
        return self._result(result, bool(kwargs.get("tools") or self.tools))

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        request = self._request(messages, stop, kwargs)
        result = await asyncio.wrap_future(self.engine.submit(request))
        return self._result(result, bool(kwargs.get("tools") or self.tools))
