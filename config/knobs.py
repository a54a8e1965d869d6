"""No silent knobs (docs/design.md, Principles): the run-config keys that have no effect somewhere, and those that act
on speed or memory only, each with its reason.

Every numeric and boolean key of ``RunConfig`` either changes something observable when flipped —
the loss mask, advantages, the trained adapter, archive rows, a gate decision, phase lengths — or is
declared here. ``tests/unit/test_knobs.py`` flips every key on small fakes and checks both: a key
with an effect shows it, a key in ``INERT`` leaves everything as it was under the condition stated
(and shows its effect where it acts), and the field's own description says "no effect" too, so the
reader of the config learns it where the key is declared.
"""

from __future__ import annotations

INERT: dict[str, str] = {
    "train.epsilon": "no effect with train.num_iterations = 1 (the default): each generation batch serves one "
                     "optimiser step, so pi_old is the sampling policy and the ratio of Eq. 7 is 1 (up to float "
                     "rounding where Eq. 16 scores pi_old in its own forward: no clip wider than rounding acts); "
                     "the clip acts from num_iterations = 2 on. RSFT has no ratio.",
    "train.epsilon_high": "no effect with train.num_iterations = 1, as train.epsilon.",
    "train.lora_dropout": "no effect in GRPO: the trainer runs with dropout disabled (TRL disable_dropout=True) so "
                          "pi_theta is the distribution the tokens were sampled from; RSFT's SFT steps use it.",
    "meta.temperature": "no effect with the offline meta roles (meta.model = 'offline'): no LLM is sampled; the "
                        "LLM roles decode at it.",
    "harness_s.voters": "no effect with the offline meta roles: the router is the one Rule Router; with an LLM "
                        "meta.model it is the number of LLM voters V (Eq. 9).",
}
"""Key -> when it has no effect and why (the condition is part of the sentence)."""

PERFORMANCE: dict[str, str] = {
    "train.micro_batches": "gradient-accumulation micro-steps per optimiser step: memory and speed; the loss is "
                           "normalised over the whole batch, so the update is the same up to float rounding.",
    "train.pack_prefixes": "scores a micro-batch with its rows' shared prompt tokens run once (one micro-step for "
                           "the whole batch when micro_batches is unset): speed; the log-probs, loss and gradients "
                           "are those of row-by-row scoring (tests/unit/test_compat_training.py).",
    "train.merge_sampler": "the live sampler (GRPO's and RSFT's) decodes a step's rollouts with the LoRA adapter "
                           "merged into copies of the base weights: speed; logits equal the unmerged ones up to float "
                           "rounding (bit-identical while B = 0), the trained weights are untouched "
                           "(tests/unit/test_merged_sampling.py).",
    "train.activation_checkpointing": "recomputes activations in the backward pass: memory for time.",
    "train.max_memory_gb": "the memory a GRPO or RSFT stage plans for: more micro-steps (the same update up to "
                           "float rounding), then a lower max_len, or a refusal (coevo.training.memory).",
    "train.max_concurrency": "rollouts in flight during a stage: speed; each rollout keeps its seed.",
    "train.use_cpu": "where the trainer runs (None: CPU without a CUDA device).",
    "train.logging_steps": "how often TRL logs a step's metrics (1: one history row per step).",
    "train.sampler_threads": "torch threads decoding a stage's rollouts (the live sampler's worker; the backward "
                             "pass keeps torch's default): speed; the tokens are those of the default up to float "
                             "rounding.",
    "train.max_batch": "requests the RSFT live sampler batches together: speed.",
    "eval.concurrency": "rollouts in flight during an evaluation, and the rows a local policy's engine decodes in "
                        "one batch: speed; each rollout keeps its seed.",
    "eval.share_test": "test evaluations identified without the run, so another run of the archive testing the same "
                       "pair on the same tasks and seeds reads the first one's rollouts back: speed; the rollouts are "
                       "the ones it would decode (same seeds), and test selects nothing.",
    "eval.threads": "torch threads of a local policy's decoding worker: speed (one costs less CPU than two for a "
                    "135M model's short replies); the replies are those of the default up to float rounding.",
}
"""Key -> what it changes (speed, memory, logging) while the numbers stay the same by design; the
knob test checks the setting reaches that mechanism."""
