"""Aggregate decode throughput of the local policy: N concurrent requests vs one stream.

Runs greedy decoding on SmolLM2-135M-Instruct (``local:smollm2-135m``, converted on first use):
first every prompt alone, one after another (single stream), then all prompts at once through
``asyncio.gather`` (the engine batches them into one ``generate`` call). Reports generated
tokens per second for both, the speed-up, and whether every batched greedy completion equals
its unbatched one. Target: aggregate >= 4x single-stream at 16 concurrent requests.

    python benchmarks/bench_local_batching.py [--concurrency 16] [--new-tokens 32] [--ref local:smollm2-135m]

Prints a markdown table row (header with ``--header``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402

from coevo.models.base import TOKENS_KEY  # noqa: E402
from coevo.models.refs import load_model  # noqa: E402

TOPICS = ["prime numbers", "the water cycle", "binary search", "photosynthesis", "the French revolution",
          "black holes", "sorting algorithms", "volcanoes", "the immune system", "neural networks",
          "plate tectonics", "compound interest", "the moon landing", "DNA replication", "recursion",
          "climate change", "graph theory", "the printing press", "electric motors", "honey bees"]


def prompts(n: int) -> list[list[HumanMessage]]:
    """``n`` distinct single-turn prompts of varied length (so the batch needs left padding)."""
    return [[HumanMessage(f"Explain {TOPICS[i % len(TOPICS)]} in "
                          f"{'one sentence' if i % 2 else 'simple words for a child'}.")]
            for i in range(n)]


def completion_ids(reply) -> list[int]:
    return reply.response_metadata[TOKENS_KEY]["completion_token_ids"]


async def run(ref: str, concurrency: int, new_tokens: int) -> dict:
    model = load_model(ref, temperature=0.0, max_tokens=new_tokens, max_batch=concurrency)
    batch = prompts(concurrency)
    model.invoke(batch[0], max_tokens=4)  # warm-up

    start = time.perf_counter()
    single = [await model.ainvoke(msgs) for msgs in batch]
    single_s = time.perf_counter() - start
    single_tokens = sum(len(completion_ids(r)) for r in single)

    model.engine.batch_sizes.clear()
    start = time.perf_counter()
    batched = await asyncio.gather(*(model.ainvoke(msgs) for msgs in batch))
    batched_s = time.perf_counter() - start
    batched_tokens = sum(len(completion_ids(r)) for r in batched)

    equal = sum(completion_ids(a) == completion_ids(b) for a, b in zip(single, batched))
    return {"ref": ref, "device": str(next(model.engine.model.parameters()).device),
            "threads": torch.get_num_threads(), "concurrency": concurrency, "new_tokens": new_tokens,
            "single_tps": single_tokens / single_s, "batched_tps": batched_tokens / batched_s,
            "batch_sizes": list(model.engine.batch_sizes), "equal": equal}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="local:smollm2-135m")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--header", action="store_true", help="print the markdown table header first")
    args = parser.parse_args()
    r = asyncio.run(run(args.ref, args.concurrency, args.new_tokens))
    if args.header:
        print("| model | device (threads) | concurrent | new tokens | single-stream tok/s | batched tok/s "
              "| speed-up | generate calls | greedy batched == unbatched |")
        print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {r['ref']} | {r['device']} ({r['threads']}) | {r['concurrency']} | {r['new_tokens']} "
          f"| {r['single_tps']:.1f} | {r['batched_tps']:.1f} | {r['batched_tps'] / r['single_tps']:.1f}x "
          f"| {len(r['batch_sizes'])} | {r['equal']}/{r['concurrency']} |")


if __name__ == "__main__":
    main()
