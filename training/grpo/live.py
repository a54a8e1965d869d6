"""The live sampler of a weight stage (docs/design.md, Training): the trainer's own current weights as a
chat model, and the mode a block of rollouts samples in (eval mode; the LoRA adapter merged into the
base weights, ``coevo.models.merged``, while no optimiser step runs)."""

from __future__ import annotations

import contextlib
from contextlib import contextmanager
from typing import Any, Iterator

from langchain_core.language_models import BaseChatModel

from coevo.models.trajectory import Trajectory


class LivePolicy:
    """The default ``policy_factory``: the trainer's own current weights as a chat model
    (``coevo.models.local.LocalChatModel`` over the live PEFT model), so rollouts sample from the
    current LoRA policy and the sampler is the trainer (no Eq. 16 correction needed). One engine
    per stage, made at the first call and kept in ``policy``, batching a whole generation batch
    (``max_batch`` rows per ``generate`` call; ``None``: the trainer's ``generation_batch_size``);
    ``threads`` torch threads in its decoding worker (``None``: torch's default; the trainer's own
    thread, which runs the backward pass, keeps its setting); ``close`` stops its worker thread."""

    def __init__(self, max_batch: int | None = None, threads: int | None = None) -> None:
        self.max_batch, self.threads = max_batch, threads
        self.policy: Any = None

    def __call__(self, trainer: Any) -> BaseChatModel:
        """The chat model over ``trainer.model`` (the same one at every step: it reads the live weights)."""
        if self.policy is None:
            from coevo.models.local import LocalChatModel

            model = trainer.accelerator.unwrap_model(trainer.model)
            batch = self.max_batch or max(1, int(trainer.args.generation_batch_size))
            self.policy = LocalChatModel.from_model(model, trainer.processing_class, name="grpo-policy",
                                                    max_batch=batch, threads=self.threads)
        return self.policy

    def close(self) -> None:
        """Stop the engine's worker thread (no-op before the first call; idempotent)."""
        if self.policy is not None:
            self.policy.engine.close()


def fill_prompt_ids(trajectory: Trajectory, tokenizer: Any) -> None:
    """Give calls that carry sampled ``completion_token_ids`` but no ``prompt_token_ids`` (a server
    that does not return them, e.g. vLLM before ``return_token_ids``) the ids of their input messages
    under ``tokenizer``'s chat template (generation prompt appended; tool schemas not rendered).
    Calls that already have prompt ids are left alone."""
    from langchain_core.messages import messages_from_dict

    from coevo.models.messages import messages_to_chat

    for call in trajectory.calls:
        if call.prompt_token_ids is None and call.completion_token_ids and call.input:
            text = tokenizer.apply_chat_template(messages_to_chat(messages_from_dict(call.input)),
                                                 add_generation_prompt=True, tokenize=False)
            call.prompt_token_ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])


@contextmanager
def sampling_mode(model: Any, policy: Any = None, merge: bool = False) -> Iterator[None]:
    """``eval_mode(model)`` for a block of rollouts, and with ``merge`` the ``policy``'s local engine
    (if it has one) decoding with its LoRA adapter merged into the base weights
    (``LocalEngine.merged``): the caller promises the weights do not change inside the block."""
    engine = getattr(policy, "engine", None)
    merged = engine.merged() if merge and callable(getattr(engine, "merged", None)) else contextlib.nullcontext()
    with eval_mode(model), merged:
        yield


@contextmanager
def eval_mode(model: Any) -> Iterator[None]:
    """Put ``model`` in eval mode (no dropout) for sampling, restoring its mode afterwards."""
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        yield
    finally:
        if was_training:
            model.train()
