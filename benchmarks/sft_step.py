"""One RSFT minibatch step (forward and backward of ``coevo.training.sft.sft_loss``) on SmolLM2-135M-Instruct with
the stage's LoRA (``lora_config``: r 8 on every linear layer), three ways (``--loss``):

- ``shared`` (the stage since 2026-12-07): rows that share a prompt run its forward once, and only the positions
  that predict a policy token are projected onto the vocabulary;
- ``kept``: each row its own forward, only the policy positions projected;
- ``full``: each row its own forward, every position projected, as the loss was before (the full logits, their
  log-softmax, then the masked sum).

Rows: ``--rows`` (default 4, the presets' minibatch) over ``--tasks`` prompts in turn (default 2: the step's tasks
of the presets' ``tasks_per_step = 2``, whose rollouts share a prompt) of ``--prompt`` tokens (default 280: the
showcase's prompt, as the WHALE table's RSFT stages measured) and ``--completion`` policy tokens (default 16, the
tables' new tokens), random ids. Run each way in its own process (the peak RSS is the process's). Prints one JSON
line: seconds per step (each of ``--steps``, after one warm-up step), the process's peak RSS (GB), user CPU seconds.

    OMP_NUM_THREADS=1 python benchmarks/sft_step.py --loss shared|kept|full
"""

from __future__ import annotations

import argparse
import json
import resource
import time


def full_projection_loss(model, rows, torch):
    """``sft_loss`` as it was before 2026-12-07: every position's logits, log-softmax, then the masked mean (and,
    as then, without ``use_cache=False``: in train mode Llama also builds a KV cache)."""
    width = max(len(r.prompt_ids) + len(r.completion_ids) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attn, mask = torch.zeros_like(ids), torch.zeros_like(ids)
    for i, r in enumerate(rows):
        length = len(r.prompt_ids) + len(r.completion_ids)
        ids[i, :length] = torch.tensor(r.prompt_ids + r.completion_ids)
        attn[i, :length] = 1
        mask[i, len(r.prompt_ids):length] = torch.tensor(r.env_mask)
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return -(logp * mask[:, 1:]).sum() / int(mask.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loss", choices=["shared", "kept", "full"], default="shared")
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=280)
    parser.add_argument("--completion", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()

    import random

    import torch
    from peft import get_peft_model

    from coevo.config.train import StageConfig
    from coevo.models.checkpoint import Checkpoint
    from coevo.models.smollm2 import ensure_smollm2
    from coevo.training import sft
    from coevo.training.checkpoint import load_policy
    from coevo.training.grpo.samples import Row
    from coevo.training.grpo.stage import lora_config

    torch.manual_seed(0)
    model, _ = load_policy(Checkpoint(id="base", base_model=str(ensure_smollm2())))
    model = get_peft_model(model, lora_config(StageConfig()))
    model.train()
    rng = random.Random(0)
    prompts = [[rng.randrange(1, 49_000) for _ in range(args.prompt)] for _ in range(args.tasks)]
    rows = [Row(prompts[i % args.tasks], [rng.randrange(1, 49_000) for _ in range(args.completion)],
                [1] * args.completion, [0.0] * args.completion, 1.0, i % args.tasks) for i in range(args.rows)]
    if args.loss == "kept":
        sft.shares_prompts = lambda model, rows: False  # each row its own forward
    loss_fn = (lambda: full_projection_loss(model, rows, torch)) if args.loss == "full" else (
        lambda: sft.sft_loss(model, rows))
    seconds = []
    for step in range(args.steps + 1):
        started = time.perf_counter()
        model.zero_grad()
        loss = loss_fn()
        loss.backward()
        if step:
            seconds.append(round(time.perf_counter() - started, 2))
    own = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"loss_fn": args.loss, "rows": args.rows, "tasks": args.tasks, "prompt": args.prompt,
                      "completion": args.completion, "loss": round(float(loss), 4), "step_s": seconds,
                      "peak_rss_gb": round(own.ru_maxrss / 1024**2, 2), "user_s": round(own.ru_utime, 1)}))


if __name__ == "__main__":
    main()
