"""A process's resident memory after each of several weight stages in a row: what a long ``coevo compare`` or
table process holds between stages, and what handing the freed heap back to the OS after each stage costs
(``--trim``: ``coevo.training.memory.release_freed_memory``, ``gc.collect()`` then glibc's ``malloc_trim(0)``,
which the run's stage trainer does after every weight stage since 2026-12-07; this script calls the RSFT stage
directly, so without ``--trim`` it shows the process as it was before).

RSFT stages at CoEvo-RSI's preset sizes (``configs/papers/coevo_rsi.toml``: 8 tasks x 3 rollouts, minibatch 8, 48
new tokens, T = 1.0, lr 5e-5; the tables override 16 new tokens and T = 0.7) on the default job's train tasks
under H0, SmolLM2-135M-Instruct on CPU, each from the base weights. Prints one JSON line: RSS (GB) before and after
each stage, the process's peak, wall seconds of the stages, user and system CPU seconds of the process (set-up
included). Measured results: ``docs/benchmarks/papers.md`` ("Memory of a long table process").

    OMP_NUM_THREADS=1 python benchmarks/stage_rss.py [--stages 3] [--trim]
"""

from __future__ import annotations

import argparse
import json
import resource
import time


def rss_gb() -> float:
    """This process's resident set now, GB (``/proc/self/status``, Linux)."""
    with open("/proc/self/status") as status:
        return int(status.read().split("VmRSS:")[1].split()[0]) / 1024**2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=3, help="RSFT stages in a row (default 3)")
    parser.add_argument("--trim", action="store_true",
                        help="release_freed_memory() after each stage (what the stage trainer does)")
    args = parser.parse_args()

    from stage_kit import default_stage

    from coevo.training.memory import release_freed_memory
    from coevo.training.rsft import train_rsft

    stage = default_stage(algorithm="rsft", steps=1, tasks_per_step=8, num_generations=3, minibatch_size=8,
                          max_new_tokens=48, temperature=1.0, learning_rate=5e-5)
    after = [round(rss_gb(), 2)]
    started = time.time()
    for _ in range(args.stages):
        train_rsft(stage["checkpoint"], stage["spec"], stage["env"], stage["tasks"], stage["config"])
        if args.trim:
            release_freed_memory()  # gc.collect(), then glibc's malloc_trim(0): free pages of every arena to the OS
        after.append(round(rss_gb(), 2))
    own = resource.getrusage(resource.RUSAGE_SELF)
    wall = round(time.time() - started, 1)
    print(json.dumps({"trim": args.trim, "rss_gb_before_and_after_each_stage": after, "stages_wall_s": wall,
                      "peak_rss_gb": round(own.ru_maxrss / 1024**2, 2), "user_s": round(own.ru_utime, 1),
                      "system_s": round(own.ru_stime, 1)}))


if __name__ == "__main__":
    main()
