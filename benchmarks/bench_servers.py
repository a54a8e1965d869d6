"""Rollouts beyond one process (issue 16), measured side by side in one run.

(r) Router: evaluation throughput with the policy on 1 vs 2 local OpenAI-compatible servers behind
    ``RouterChatModel`` (``litellm:openai/stub?api_base=A[,B]``). Each server is a stub
    (``tests/server_kit.StubServer``) with a fixed throughput — ``--latency`` seconds per request,
    ``--capacity`` requests at once — standing in for a model server whose GPU is the bottleneck
    (two real SmolLM2 servers on a 2-core box would only share the same two cores). Ideal ratio 2.0.
(d) Dead server: how many of the first ``--burst`` concurrent calls reach a closed port when it is one
    of three servers: ``litellm.Router`` (cooldown after failures are counted) vs coevo's router
    (one probe per cooldown window). Every call must succeed in both.
(x) Executor: evaluation wall time in process vs on Ray workers (``RayExecutor``, ``--workers``)
    with a CPU-bound fake env (``tests/executor_kit.BusyEnv``: ``--cpu-ms`` of CPU per tool step,
    2 steps per rollout) and a zero-latency fake policy. Ideal ratio: the number of free cores.
    Ray's start-up and the workers' imports are excluded (a warm-up evaluation runs first).

    python benchmarks/bench_servers.py [--quick]

Prints a markdown table and the load average before and after (the box may be shared).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from pathlib import Path

for _key, _value in {"HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                     "LANGGRAPH_NO_VERSION_CHECK": "true", "OPENAI_API_KEY": "sk-stub"}.items():
    os.environ.setdefault(_key, _value)
TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

from executor_kit import BusyEnv, busy_policy, busy_spec  # noqa: E402
from server_kit import StubServer, free_port  # noqa: E402

from coevo.envs.registry import get_env  # noqa: E402
from coevo.evaluation.engine import evaluate  # noqa: E402
from coevo.harnesses import load_harness  # noqa: E402
from coevo.models.refs import load_model  # noqa: E402


async def router_throughput(n: int, servers: int, latency: float, capacity: int, concurrency: int) -> float:
    """(r): rollouts/s of ``n`` rollouts (reasoning-gym train tasks, one model call each; k rollouts
    per task when ``n`` exceeds the 60 tasks) on ``servers`` stubs."""
    env, spec = get_env("reasoning_gym:families=word_sorting"), load_harness("reasoning_gym")
    stubs = [StubServer(lambda m: "Final answer: a, b", latency_s=latency, capacity=capacity) for _ in range(servers)]
    for s in stubs:
        s.__enter__()
    try:
        model = load_model("litellm:openai/stub?api_base=" + ",".join(s.url for s in stubs), max_retries=0)
        started = time.perf_counter()
        k = -(-n // 60)
        result = await evaluate(spec, "stub", env, "train", n_tasks=n // k, k=k, model=model, concurrency=concurrency)
        wall = time.perf_counter() - started
        assert result.n_rollouts == n and all(s.requests > 0 for s in stubs), result
        return n / wall
    finally:
        for s in stubs:
            s.__exit__()


async def dead_server_attempts(burst: int) -> dict[str, int]:
    """(d): calls that reached the closed port out of ``burst`` concurrent ones, per router."""
    import litellm
    from langchain_core.messages import HumanMessage
    from litellm.integrations.custom_logger import CustomLogger

    dead = f"http://127.0.0.1:{free_port()}/v1"
    with StubServer(latency_s=0.02) as a, StubServer(latency_s=0.02) as b:
        seen = {"litellm": 0}

        class DeadCalls(CustomLogger):
            def log_pre_api_call(self, model, messages, kwargs):
                if dead in str(kwargs.get("api_base") or (kwargs.get("litellm_params") or {}).get("api_base")):
                    seen["litellm"] += 1

        litellm.callbacks = [DeadCalls()]
        try:
            router = litellm.Router(model_list=[{"model_name": "p", "litellm_params": {
                "model": "openai/stub", "api_base": url, "api_key": "sk-stub"}} for url in (a.url, b.url, dead)],
                num_retries=3, cooldown_time=30, allowed_fails=0, retry_after=0)
            replies = await asyncio.gather(*(router.acompletion(model="p", messages=[{"role": "user", "content": "hi"}])
                                             for _ in range(burst)))
            assert len(replies) == burst
        finally:
            litellm.callbacks = []
        coevo = load_model(f"litellm:openai/stub?api_base={a.url},{b.url},{dead}&cooldown_s=30")
        replies = await asyncio.gather(*(coevo.ainvoke([HumanMessage("hi")]) for _ in range(burst)))
        assert len(replies) == burst
        return {"litellm": seen["litellm"], "coevo": coevo.pool.servers[2].attempts}


async def executor_wall(n: int, cpu_ms: float, workers: int, concurrency: int) -> tuple[float, float]:
    """(x): wall seconds in process and on ``workers`` Ray workers for ``n`` BusyEnv rollouts."""
    import ray

    from coevo.evaluation.executors import RayExecutor

    env, spec = BusyEnv(n, cpu_ms=cpu_ms), busy_spec()
    started = time.perf_counter()
    here = await evaluate(spec, "fake", env, "val", model=busy_policy(), concurrency=concurrency)
    in_process = time.perf_counter() - started
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    runner = RayExecutor(workers=workers)
    try:
        await evaluate(spec, "fake", BusyEnv(2 * workers, cpu_ms=1), "val", model=busy_policy(), executor=runner)
        started = time.perf_counter()
        there = await evaluate(spec, "fake", env, "val", model=busy_policy(), concurrency=concurrency, executor=runner)
        on_ray = time.perf_counter() - started
    finally:
        runner.close()
        ray.shutdown()
    assert there.per_task == here.per_task
    return in_process, on_ray


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer tasks (a smoke run, not a measurement)")
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--capacity", type=int, default=4)
    parser.add_argument("--burst", type=int, default=16)
    parser.add_argument("--cpu-ms", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    n_router, n_exec = (48, 24) if args.quick else (240, 120)
    load_before = os.getloadavg()
    one = asyncio.run(router_throughput(n_router, 1, args.latency, args.capacity, 16))
    two = asyncio.run(router_throughput(n_router, 2, args.latency, args.capacity, 16))
    dead = asyncio.run(dead_server_attempts(args.burst))
    in_process, on_ray = asyncio.run(executor_wall(n_exec, args.cpu_ms, args.workers, 16))
    load_after = os.getloadavg()
    ideal_one = args.capacity / args.latency
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after\n")
    print("| # | benchmark | measured | reference | ratio | ideal |")
    print("|---|---|---|---|---|---|")
    print(f"| (r) | {n_router} rollouts, concurrency 16, through 2 stub servers ({args.latency * 1000:.0f} ms, "
          f"{args.capacity} at once each) behind the router | {two:.1f} rollouts/s | 1 server: {one:.1f} rollouts/s "
          f"(its ceiling {ideal_one:.0f}/s) | **{two / one:.2f}x** | 2.00x |")
    print(f"| (d) | first {args.burst} concurrent calls, 2 stub servers + 1 closed port: calls reaching the "
          f"closed port | coevo router: {dead['coevo']} | litellm.Router: {dead['litellm']} | | ≤ 1 |")
    print(f"| (x) | {n_exec} rollouts of a CPU-bound env (2 steps × {args.cpu_ms:.0f} ms CPU), concurrency 16 | "
          f"Ray, {args.workers} workers: {on_ray:.2f} s | in process: {in_process:.2f} s | "
          f"**{in_process / on_ray:.2f}x** | {args.workers:.2f}x |")


if __name__ == "__main__":
    main()
