"""Small fakes for training tests: a tiny random Llama checkpoint with a character tokenizer, a
lookup env with one tool, and a scripted policy. Nothing is downloaded.

The tokenizer maps each ASCII character to its code point, the same ids
``coevo.models.fake.ScriptedChatModel(with_tokens=True)`` emits, so the tiny model can score the
scripted policy's tokens.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from coevo.envs.base import Episode, Score, Task, Tool
from coevo.models.checkpoint import Checkpoint
from coevo.models.fake import ScriptedChatModel
from coevo.models.trajectory import ModelCall, Trajectory

VOCAB = 128


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``n`` in this thread for the block, restored after it, even when the
    block fails. For the tests about thread counts: xdist workers run on one thread (``tests/conftest.py``), so
    such a test sets a count that differs from the one it expects in the decoding worker."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def char_tokenizer() -> Any:
    """A ``PreTrainedTokenizerFast`` with one token per ASCII character (id = code point);
    ``\\x00`` is the pad token, ``\\x03`` the eos token."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({chr(i): i for i in range(VOCAB)}, unk_token="\x00"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="\x00", eos_token="\x03", unk_token="\x00")


def tiny_llama_checkpoint(directory: Path | str, seed: int = 0) -> Checkpoint:
    """Save a random 2-layer Llama (hidden 32, vocab 128) and the char tokenizer in ``directory``;
    return a ``Checkpoint`` whose ``base_model`` is that directory."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         pad_token_id=0, eos_token_id=3, bos_token_id=2)
    LlamaForCausalLM(config).save_pretrained(str(directory))
    char_tokenizer().save_pretrained(str(directory))
    return Checkpoint(id="ckpt-tiny", base_model=str(directory))


def tiny_chat_checkpoint(directory: Path | str) -> Checkpoint:
    """``tiny_llama_checkpoint`` whose char tokenizer has a plain chat template (``role: content``
    lines, then ``assistant: ``), so the live-weights sampler can render harness messages."""
    ckpt = tiny_llama_checkpoint(directory)
    tok = char_tokenizer()
    tok.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                         "{% if add_generation_prompt %}assistant: {% endif %}")
    tok.save_pretrained(str(directory))
    return ckpt


def random_adapter(base: Checkpoint, directory: Path, seed: int, **lora: Any) -> Checkpoint:
    """A LoRA adapter over ``base`` with random A and B (``init_lora_weights=False``; r 4, alpha 8,
    every linear layer unless ``lora`` says otherwise) saved in ``directory``; id ``ckpt-<seed>``."""
    import torch
    from peft import LoraConfig, get_peft_model

    from coevo.training.checkpoint import load_policy

    model, _ = load_policy(base)
    torch.manual_seed(seed)
    options = {"r": 4, "lora_alpha": 8, "target_modules": "all-linear", "init_lora_weights": False, **lora}
    peft = get_peft_model(model, LoraConfig(**options))
    peft.save_pretrained(str(directory))
    return Checkpoint(id=f"ckpt-{seed}", base_model=base.base_model, adapter_path=str(directory))


def sampled(task: Task, spec: Any, seed: int, ok: bool, checkpoint_id: str = "") -> Trajectory:
    """A scored trajectory of ``task`` under ``spec`` with one model call that carries sampled
    tokens (what a rollout function fake returns when the step must train on it)."""
    call = ModelCall(input=[], output={}, prompt_token_ids=[1, 2], completion_token_ids=[3, 4], logprobs=[-0.5, -0.5],
                     seed=seed)
    return Trajectory(task_id=task.id, split="train", harness_id=getattr(spec, "id", ""), seed=seed, calls=[call],
                      model_turns=1, reward=float(ok), passed=ok, checkpoint_id=checkpoint_id)


class LookupEnv:
    """Tasks ``"look up <key>"``; the tool ``lookup(key)`` returns ``VALUE-<key>``; the answer
    ``VALUE-<key>`` scores 1, anything else 0."""

    name = "lookup"

    def __init__(self, keys: tuple[str, ...] = ("a", "b")) -> None:
        self._tasks = [Task(id=f"lookup-{k}", env=self.name, split="train", prompt=f"look up {k}",
                            metadata={"key": k}) for k in keys]

    def tasks(self, split: str = "train", n: int | None = None) -> list[Task]:
        return self._tasks[:n]

    def episode(self, task: Task, seed: int = 0) -> Episode:
        tool = Tool("lookup", "Look up a key.", {"type": "object", "properties": {"key": {"type": "string"}},
                                                  "required": ["key"]}, lambda key: f"VALUE-{key}")
        return Episode(task=task, tools=[tool])

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        ok = (answer or "").strip() == f"VALUE-{task.metadata['key']}"
        return Score(reward=float(ok), passed=ok)


def lookup_policy(right_every: int = 2, hint: str | None = None) -> ScriptedChatModel:
    """A scripted policy for ``LookupEnv`` with a python-call parser: it first calls
    ``[lookup(key="<key>")]``, then answers ``Final answer: VALUE-<key>`` on every
    ``right_every``-th episode (and only when ``hint``, if given, occurs in its context) and a
    wrong value otherwise. Emits char token ids."""
    episodes = itertools.count()

    def reply(messages: list[BaseMessage]) -> str:
        seen = [str(m.content) for m in messages if "VALUE-" in str(m.content)]
        if not seen:
            task = next(str(m.content) for m in messages if "look up" in str(m.content))
            return f'[lookup(key="{task.rsplit(" ", 1)[-1]}")]'
        value = seen[-1][seen[-1].index("VALUE-"):].split()[0]
        hinted = hint is None or any(hint in str(m.content) for m in messages)
        return f"Final answer: {value}" if next(episodes) % right_every == 0 and hinted else "Final answer: nope"

    return ScriptedChatModel(script=[reply], with_tokens=True)


NAMING_WORDS = {
    "fruits": ["apple", "banana", "orange", "grape", "mango", "pear", "cherry", "strawberry", "peach", "lemon"],
    "colors": ["red", "blue", "green", "yellow", "purple", "orange", "black", "white", "pink", "brown"],
}


def belief_policy() -> ScriptedChatModel:
    """``LookupEnv``'s policy under a BPE harness: every episode answers right; every other one first
    writes a belief (a costed harness action), so the action cost is the group's only reward contrast."""
    episodes = itertools.count()

    def reply(messages: list[BaseMessage]) -> str:
        text = "\n".join(str(m.content) for m in messages)
        task = next(str(m.content) for m in messages if "look up" in str(m.content)).rsplit(" ", 1)[-1]
        if "VALUE-" in text:
            return f"Final answer: VALUE-{task}"
        if "belief updated" not in text and next(episodes) % 2 == 0:
            return '[bpe_update_belief(hypothesis="the value is in the table")]'
        return f'[lookup(key="{task}")]'

    return ScriptedChatModel(script=[reply], with_tokens=True)


class NamingEnv:
    """``Name three <kind>.`` for a real small model: reward = distinct listed words named / 3
    (capped at 1), ``passed`` at 1. Graded credit gives sampled groups a reward spread."""

    name = "naming"

    def __init__(self) -> None:
        self._tasks = [Task(id=f"name-{k}", env=self.name, split="train", prompt=f"Name three {k}.",
                            metadata={"kind": k}) for k in NAMING_WORDS]

    def tasks(self, split: str = "train", n: int | None = None) -> list[Task]:
        return self._tasks[:n]

    def episode(self, task: Task, seed: int = 0) -> Episode:
        return Episode(task=task)

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        text = (answer or "").lower()
        reward = min(1.0, sum(w in text for w in NAMING_WORDS[task.metadata["kind"]]) / 3)
        return Score(reward=reward, passed=reward == 1.0)
