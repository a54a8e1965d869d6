"""The live sampler's speed-only changes side by side in one process (issue 24, rows (m) and (p)).

The default job's stage workload (``stage_kit.default_stage``: chain_sum prompts under H0, a step's
``tasks_per_step x num_generations`` rows per ``generate_batch`` call, T = 0.7, 48 new tokens, each
row's hashed seed) decoded by the local engine, interleaved batch by batch so that load on the
machine hits every variant alike:

- (m) the PEFT model with a LoRA adapter (``--adapter``, default: the stage's LoRA config with
  random ``B``, std 0.02, seed 0) decoded unmerged vs merged (``LocalEngine.merged``, what
  ``train.merge_sampler`` does in a stage) vs the base model without an adapter (what
  ``bench_stage.py``'s (b1) reference decodes): seconds per sampled token, and how many rows sample
  the same tokens merged and unmerged (a count; log-probs' largest difference on those rows).
- (p) prefill of a step's batch (``max_tokens = 1``) with a group's identical prompts prefilled once
  (``coevo.models.decode``) vs once per row (the code before): seconds.

    python benchmarks/bench_sampler.py                 # 10 tasks x 4 seeds, 1 round
    python benchmarks/bench_sampler.py --rounds 3 --adapter /path/to/adapter

Prints the rows as a markdown table, in wall-clock and CPU seconds; timings on a loaded machine are
noisy, CPU-time ratios less so.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from stage_kit import default_stage


def workload(stage: dict[str, Any], engine: Any, tasks: int) -> list[Any]:
    """The stage's first-turn requests for its first ``tasks`` tasks, K seeds each."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from coevo.harnesses.view import render_messages
    from coevo.models.sampling import GenerationRequest
    from coevo.training.grpo.seeds import rollout_seed

    spec, cfg = stage["spec"], stage["config"]
    out = []
    for x, task in enumerate(stage["tasks"][:tasks]):
        ids = engine.render([SystemMessage(c) if role == "system" else HumanMessage(c)
                             for role, c in render_messages(spec, task.prompt)])
        out += [GenerationRequest(prompt_ids=ids, max_tokens=spec.budget.max_output_tokens,
                                  temperature=spec.decoding.temperature, top_p=spec.decoding.top_p,
                                  seed=rollout_seed(cfg.seed, 0, "group", x, task.id, j))
                for j in range(cfg.num_generations)]
    return out


def engines(stage: dict[str, Any], adapter: str | None) -> dict[str, Any]:
    """``{"base": engine over the plain model, "lora": engine over the PEFT model}``."""
    import torch
    from peft import PeftModel, get_peft_model

    from coevo.models.local_engine import LocalEngine
    from coevo.training.checkpoint import load_policy
    from coevo.training.grpo.stage import lora_config

    base, tokenizer = load_policy(stage["checkpoint"])
    model, _ = load_policy(stage["checkpoint"])
    if adapter:
        peft = PeftModel.from_pretrained(model, adapter, is_trainable=True)
    else:
        peft = get_peft_model(model, lora_config(stage["config"]))
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, p in peft.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.02, generator=generator)
    return {"base": LocalEngine(base, tokenizer), "lora": LocalEngine(peft, tokenizer)}


def run(tasks: int, rounds: int, adapter: str | None) -> dict[str, Any]:
    """Time the variants batch by batch (rotating their order); returns seconds, tokens and the counts."""
    from coevo.models import decode

    stage = default_stage(0, 1, resample=0)
    eng = engines(stage, adapter)
    requests = workload(stage, eng["lora"], tasks)
    batch = stage["config"].tasks_per_step * stage["config"].num_generations
    unique_rows = decode._unique_rows

    def once_per_row(prompts: Any, names: Any) -> tuple[list[int], list[int]]:
        rows = list(range(len(prompts)))
        return rows, rows

    def go(kind: str, reqs: list[Any]) -> list[Any]:
        if kind == "merged":
            with eng["lora"].merged():
                return eng["lora"].generate_batch(reqs)
        if kind == "prefill per row":
            decode._unique_rows = once_per_row
            try:
                return eng["base"].generate_batch(reqs)
            finally:
                decode._unique_rows = unique_rows
        return eng["base" if kind in ("base", "prefill once") else "lora"].generate_batch(reqs)

    kinds = ["base", "unmerged", "merged"]
    seconds = dict.fromkeys(kinds + ["prefill once", "prefill per row"], 0.0)
    cpu = dict(seconds)
    tokens = dict.fromkeys(kinds, 0)
    rows: dict[str, list[Any]] = {k: [] for k in kinds}
    for kind in kinds:
        go(kind, requests[:2])  # warm-up
    for r in range(rounds):
        for i, b in enumerate(range(0, len(requests), batch)):
            reqs = requests[b:b + batch]
            shift = i % len(kinds)
            for kind in kinds[shift:] + kinds[:shift]:
                started, used = time.perf_counter(), time.process_time()
                results = go(kind, reqs)
                seconds[kind] += time.perf_counter() - started
                cpu[kind] += time.process_time() - used
                tokens[kind] += sum(len(x.completion_token_ids) for x in results)
                if r == 0:
                    rows[kind] += [(x.completion_token_ids, x.logprobs) for x in results]
            short = [type(q)(**{**vars(q), "max_tokens": 1}) for q in reqs]
            for kind in (["prefill once", "prefill per row"] if i % 2 else ["prefill per row", "prefill once"]):
                started, used = time.perf_counter(), time.process_time()
                go(kind, short)
                seconds[kind] += time.perf_counter() - started
                cpu[kind] += time.process_time() - used
    same = [a[1] for a, b in zip(rows["unmerged"], rows["merged"]) if a[0] == b[0]]
    worst = max((abs(x - y) for (ta, la), (tb, lb) in zip(rows["unmerged"], rows["merged"]) if ta == tb
                 for x, y in zip(la, lb)), default=0.0)
    return {"seconds": seconds, "cpu": cpu, "tokens": tokens, "rows": len(requests), "same_rows": len(same),
            "max_logprob_diff": worst, "batch": batch, "rounds": rounds}


def table(result: dict[str, Any]) -> str:
    """The rows (m) and (p) as markdown, in wall-clock and in CPU seconds of this process (the CPU
    figures move less with other jobs on the machine)."""
    t = result["tokens"]
    lines = ["| # | measurement | wall clock | CPU time |", "|---|---|---|---|"]
    cells = []
    for clock in ("seconds", "cpu"):
        per = {k: result[clock][k] / max(1, t[k]) for k in t}
        cells.append(f"{1e3 * per['unmerged']:.0f} / {1e3 * per['merged']:.0f} / {1e3 * per['base']:.0f} ms: merged "
                     f"**{per['merged'] / per['unmerged']:.2f}x** unmerged, {per['merged'] / per['base']:.2f}x base")
    lines.append(f"| (m) | seconds per sampled token, {result['rows']} rows x {result['rounds']} round(s), "
                 f"{result['batch']} a call: LoRA unmerged / merged / base model | {cells[0]} | {cells[1]} |")
    lines.append(f"| (m) | rows sampling the same tokens merged and unmerged | {result['same_rows']}/{result['rows']} "
                 f"(log-probs within {result['max_logprob_diff']:.1e}) | |")
    cells = [f"{result[c]['prefill once']:.2f} / {result[c]['prefill per row']:.2f} s: "
             f"**{result[c]['prefill once'] / result[c]['prefill per row']:.2f}x**" for c in ("seconds", "cpu")]
    lines.append(f"| (p) | prefill of a step's batch: group prompts once / once per row | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--adapter", help="a PEFT adapter directory (default: random B, std 0.02)")
    args = parser.parse_args()
    print(table(run(args.tasks, args.rounds, args.adapter)))


if __name__ == "__main__":
    main()
