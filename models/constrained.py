"""JSON-schema-constrained decoding for the local engine, with llguidance.

A request that carries a JSON schema (``GenerationRequest.json_schema``, set by ``LocalChatModel``
from a call's ``response_format``: ``coevo.models.structured``) decodes under a token mask: at each
step only the tokens that keep the text a prefix of some JSON document valid under the schema are
allowed, and once the document is complete only an end-of-sequence token is. So a meta role's
reply from a local model always parses (unless it runs out of ``max_tokens`` first). Rows without
a schema in the same batch decode as before.

Why llguidance (1.9): it installs as one abi3 wheel with no dependencies on CPU Python 3.11, takes a
JSON schema as it is (nested objects, arrays with min/max items, enums, patterns, string lengths,
``additionalProperties``, recursive "any JSON" values such as a patch op's ``value``), and computes
a row's mask in about a millisecond on SmolLM2's 49k-token vocabulary (an Earley parser over a
lexer, walking the token trie), so it runs inside ``generate`` as a ``LogitsProcessor`` on the
engine's own per-row batching. Against the alternatives on PyPI here: xgrammar 0.2.8 requires
triton and apache-tvm-ffi on Linux x86_64 (a GPU compiler on a CPU machine); outlines-core 0.2.14
compiles a schema to a regex index over the whole vocabulary, which is slow to build and cannot
express unbounded recursive JSON; lm-format-enforcer 0.11.3 and transformers-cfg are pure-Python
per-token parsers, far slower per step.

How it fits the engine (``coevo.models.local_engine``): ``SchemaConstraints`` belongs to one engine
(its tokenizer, converted once, and compiled grammars cached per schema); ``processor(requests)``
gives the ``LogitsProcessor`` that runs before the engine's ``RowSampler``, so greedy and sampled
rows both pick among allowed tokens, and the logprob recorded is under the masked distribution.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Sequence

import torch
from transformers import LogitsProcessor

JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
"""llguidance JSON compile options: one fixed separator and no free whitespace, so a small model
cannot loop on blank lines between tokens (the JSON stays valid; only its layout is fixed)."""
_VALUES = ("enum", "const", "default", "examples")  # keywords whose values are JSON data, not schemas
MAX_CHARS, MAX_ITEMS = 200, 8
"""The caps ``bounded`` puts on a free string (characters) and an array (items) by default."""
MAX_GRAMMARS = 1024
"""Compiled grammars kept per engine: a policy decoding under the actions allowed now
(``Decoding.constrain``: e.g. TextWorld's admissible commands) meets a new schema most turns."""


def bounded(schema: Any, max_chars: int = MAX_CHARS, max_items: int = MAX_ITEMS) -> Any:
    """A copy of JSON schema ``schema`` in which every string without a length, pattern, enum or
    const gets ``maxLength: max_chars``, every array without ``maxItems`` gets ``max_items``, and
    every object that lists its ``properties`` without saying ``additionalProperties`` is closed
    (``additionalProperties: false``; pydantic's schemas leave it open).

    Why: under a constraint a small model may never choose to close a string, a list or an object
    (the mask allows going on, e.g. with invented keys), spending ``max_tokens`` inside one field;
    with a cap the grammar closes it and the reply stays complete. Every document valid under the
    result is valid under ``schema``."""
    if isinstance(schema, list):
        return [bounded(s, max_chars, max_items) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: v if k in _VALUES else bounded(v, max_chars, max_items) for k, v in schema.items()}
    kinds = out.get("type") if isinstance(out.get("type"), list) else [out.get("type")]
    if "string" in kinds and not {"maxLength", "pattern", "enum", "const", "format"} & set(out):
        out["maxLength"] = max_chars
    if "array" in kinds and "maxItems" not in out:
        out["maxItems"] = max_items
    if isinstance(out.get("properties"), dict) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


class SchemaConstraints:
    """The JSON-schema constraints of one engine: its tokenizer as llguidance reads it (built on first
    use, ~1 s) and one compiled grammar per distinct schema (the ``MAX_GRAMMARS`` newest).

    Args: ``tokenizer`` a fast Hugging Face tokenizer; ``vocab_size`` the model's logits width
    (``config.vocab_size``, may exceed the tokenizer's); ``eos_ids`` the token ids that end a reply;
    ``max_chars``/``max_items`` the caps ``bounded`` puts on free strings and arrays. Thread-safe.
    """

    def __init__(self, tokenizer: Any, vocab_size: int, eos_ids: Sequence[int], max_chars: int = MAX_CHARS,
                 max_items: int = MAX_ITEMS) -> None:
        self.tokenizer = tokenizer
        self.max_chars, self.max_items = max_chars, max_items
        self.vocab_size = int(vocab_size)
        self.eos_ids = sorted(int(i) for i in eos_ids)
        self._ll_tokenizer: Any = None
        self._grammars: dict[str, str] = {}
        self._lock = threading.Lock()

    def ll_tokenizer(self) -> Any:
        """The ``llguidance.LLTokenizer`` of this engine's tokenizer (cached). Raises ``ValueError``
        for a slow (non-Rust) tokenizer, which llguidance cannot read."""
        with self._lock:
            if self._ll_tokenizer is None:
                import llguidance.hf

                self._ll_tokenizer = llguidance.hf.from_tokenizer(self.tokenizer, n_vocab=self.vocab_size,
                                                                   eos_token=self.eos_ids or None)
            return self._ll_tokenizer

    def grammar(self, schema: dict[str, Any]) -> str:
        """The llguidance grammar of ``schema`` (a JSON schema dict, ``bounded``), compiled and checked once.

        Raises ``ValueError`` naming the problem when llguidance cannot compile the schema (call it
        before queueing a request, so one bad schema never fails the rest of a batch)."""
        key = json.dumps(schema, sort_keys=True)
        if key in self._grammars:
            return self._grammars[key]
        import llguidance

        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(bounded(schema, self.max_chars, self.max_items),
                                                                    overrides=JSON_OPTIONS)
        except ValueError as err:
            raise ValueError(f"response_format's JSON schema is not valid JSON: {err}") from None
        problem = llguidance.LLMatcher.validate_grammar(grammar, self.ll_tokenizer())
        if problem and not problem.startswith("WARNING"):
            raise ValueError(f"the local engine cannot decode under this JSON schema: {problem}; simplify the "
                             "schema (llguidance supports most of JSON Schema, not every keyword)")
        with self._lock:  # callers' threads and the engine's thread both compile
            self._grammars[key] = grammar
            while len(self._grammars) > MAX_GRAMMARS:  # the oldest first (a dict keeps insertion order)
                self._grammars.pop(next(iter(self._grammars)), None)
        return grammar

    def processor(self, requests: Sequence[Any]) -> "SchemaMask | None":
        """The mask processor for a batch (``requests`` in row order; a row is constrained when its
        ``json_schema`` is set), or ``None`` when no row is."""
        if not any(r.json_schema for r in requests):
            return None
        import llguidance

        tokenizer = self.ll_tokenizer()
        matchers = [llguidance.LLMatcher(tokenizer, self.grammar(r.json_schema), log_level=0)
                    if r.json_schema else None for r in requests]
        return SchemaMask(matchers)


class SchemaMask(LogitsProcessor):
    """Masks each constrained row's next-token logits to what its grammar allows.

    ``matchers`` one ``llguidance.LLMatcher`` per row (``None``: the row is free). At every step
    after the first, a constrained row's matcher consumes the token the row chose last
    (``input_ids[:, -1]``). Once the JSON is complete the mask allows only the end tokens, so the
    engine ends the row; a row whose matcher refuses a token (only the padding ``generate`` appends
    to a row that has already ended) is left alone from then on. A mask that allows nothing is not
    applied (the row would have no token to pick).
    """

    def __init__(self, matchers: Sequence[Any]) -> None:
        self.matchers = list(matchers)
        self.done = [m is None for m in self.matchers]
        self.steps = 0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """``scores`` ``(B, V)`` -> the same tensor with every disallowed token of a constrained row at
        ``-inf`` (in place). ``input_ids`` ``(B, T)``: the prompt plus the tokens chosen so far."""
        last = input_ids[:, -1].tolist() if self.steps else None
        self.steps += 1
        for row, matcher in enumerate(self.matchers):
            if self.done[row]:
                continue
            if last is not None and not matcher.consume_token(int(last[row])):
                self.done[row] = True
                continue
            allowed = torch.frombuffer(bytearray(matcher.compute_logit_bias()), dtype=torch.uint8)
            allowed = allowed[: scores.shape[-1]].to(scores.device) > 0
            if bool(allowed.any()):
                width = allowed.shape[0]
                scores[row, :width] = scores[row, :width].masked_fill(~allowed, float("-inf"))
                scores[row, width:] = float("-inf")
        return scores
