"""Task-suite throughput (issue 3): tasks/s for loading and for scoring, per suite.

- load: a fresh env object, then every split's tasks (first call builds them; import time of the
  suite's package is reported separately when measurable).
- score: gold answers through the real verifier on train tasks (reasoning_gym, bfcl AST); for
  bfcl multi_turn and textworld, a scripted gold play through the episode's tools, then the score
  (so "score" there includes executing the episode).

    python benchmarks/bench_envs.py [--quick]

TextWorld games are built once into the cache (``$COEVO_CACHE_DIR``, else ``~/.cache/coevo``); a cold
build is reported separately (seconds per game) when the cache was empty. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from coevo.envs.interaction import next_user_turn  # noqa: E402
from coevo.envs.registry import get_env  # noqa: E402


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def _load(ref: str) -> tuple[Any, int, float]:
    def run():
        env = get_env(ref)
        return env, sum(len(env.tasks(s)) for s in ("train", "val", "test"))

    (env, n), secs = _timed(run)
    return env, n, secs


def _score_answers(env: Any, tasks: list) -> float:
    started = time.perf_counter()
    for task in tasks:
        ep = env.episode(task)
        score = env.score(task, env.reveal(task), ep)
        ep.close()
        assert score.passed, (task.id, score.detail.get("public"))
    return time.perf_counter() - started


def _play_bfcl(env: Any, tasks: list) -> tuple[float, int]:
    started, passed = time.perf_counter(), 0
    for task in tasks:
        ep = env.episode(task)
        try:
            for i, turn in enumerate(env.gold_actions(task)):
                if i:
                    next_user_turn(ep, "done")
                tools = {t.name: t for t in ep.tools}
                for name, kwargs in turn:
                    tools[name].fn(**kwargs)
        except KeyError:
            pass  # a ground-truth call to a function the entry does not expose (BFCL data)
        ep.close()
        passed += env.score(task, "done", ep).passed
    return time.perf_counter() - started, passed


def _play_textworld(env: Any, tasks: list) -> tuple[float, int]:
    started, passed = time.perf_counter(), 0
    for task in tasks:
        ep = env.episode(task)
        act = next(t for t in ep.tools if t.name == "act")
        for command in env._gold[task.id]:
            act.fn(command=command)
        ep.close()
        passed += env.score(task, None, ep).passed
    return time.perf_counter() - started, passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller configs")
    args = parser.parse_args()
    rows: list[tuple[str, str, int, float]] = []

    import_s = _timed(lambda: __import__("reasoning_gym"))[1]
    rows.append(("reasoning_gym", "import reasoning_gym (s)", 1, import_s))
    size = 200 if args.quick else 1000
    env, n, secs = _load(f"reasoning_gym:families=word_sorting,size={size}")
    rows.append(("reasoning_gym", f"load word_sorting size={size}", n, secs))
    tasks = env.tasks("train")
    rows.append(("reasoning_gym", "score gold", len(tasks), _score_answers(env, tasks)))
    env, n, secs = _load(f"reasoning_gym:families=word_sorting+chain_sum+basic_arithmetic,size={size // 2}")
    rows.append(("reasoning_gym", f"load 3 families size={size // 2}", n, secs))
    tasks = env.tasks("train")
    rows.append(("reasoning_gym", "score gold (3 families)", len(tasks), _score_answers(env, tasks)))

    try:
        from coevo.envs.bfcl_import import load_bfcl

        bfcl_ns, _ = _timed(load_bfcl)
        rows.append(("bfcl", "import bfcl-eval parts (s)", 1, bfcl_ns.import_s))
        env, n, secs = _load("bfcl:categories=ast")
        rows.append(("bfcl", "load ast (8 categories)", n, secs))
        tasks = [t for t in env.tasks("train") if t.metadata["category"] == "simple_python"]
        rows.append(("bfcl", "score gold simple_python", len(tasks), _score_answers(env, tasks)))
        env, n, secs = _load("bfcl:categories=multi_turn")
        rows.append(("bfcl", "load multi_turn (4 categories)", n, secs))
        tasks = env.tasks("train", 40 if args.quick else 200)
        secs, passed = _play_bfcl(env, tasks)
        rows.append(("bfcl", f"play gold + score multi_turn ({passed} passed)", len(tasks), secs))
    except ImportError as err:
        rows.append(("bfcl", f"skipped: {err}", 0, 0.0))

    try:
        ref = "textworld:challenge=tw-simple,size=3"
        env, n, secs = _load(ref)
        rows.append(("textworld", "load tw-simple size=3 (cached after first build)", n, secs))
        _, n2, secs2 = _load(ref)
        rows.append(("textworld", "load tw-simple size=3 (warm cache)", n2, secs2))
        tasks = [t for s in ("train", "val", "test") for t in env.tasks(s)]
        secs, passed = _play_textworld(env, tasks)
        rows.append(("textworld", f"play walkthrough + score ({passed} won)", len(tasks), secs))
    except ImportError as err:
        rows.append(("textworld", f"skipped: {err}", 0, 0.0))

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"python {platform.python_version()}\n")
    print("| suite | measure | tasks | seconds | tasks/s |")
    print("|---|---|---:|---:|---:|")
    for suite, what, n, secs in rows:
        rate = f"{n / secs:,.1f}" if secs > 0 and n > 1 else "-"
        print(f"| {suite} | {what} | {n} | {secs:.3f} | {rate} |")


if __name__ == "__main__":
    main()
