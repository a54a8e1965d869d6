"""Where the harness engine's time goes (issue 4, Performance): repeats and diagnostics for
``bench_engine.py`` rows (a) and (b), on the same lookup task and scripted policy.

(a)  fake 50 ms policy, 4 calls/task, concurrency 32, 320 tasks, through ``evaluate``; ratio to the
     ideal ``32 / (0.05 s × 4)``, repeated ``--repeats`` times (median, min–max), with the default
     asyncio loop and with uvloop (when installed). Diagnostic rows: the same with each of the engine's
     two throughput measures switched off (``coevo.compat.areply``'s direct ``_agenerate`` call;
     ``evaluation.engine._frozen_heap``).
(b)  zero-latency fake, ms per rollout, sequential (min over repeats): coevo's compiled graph,
     ``create_react_agent`` built per rollout (tools are per episode: what bench_engine compares),
     ``create_react_agent`` compiled once (tools shared), and ``arun_rollout`` (what ``evaluate`` runs,
     scoring included).

    python benchmarks/bench_harness.py [--repeats 3]

Prints a markdown table. Numbers depend on the CPU and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Awaitable, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_engine as be  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402

from coevo.envs.base import Task  # noqa: E402
from coevo.harnesses.runtime import arun_rollout, build_harness_graph  # noqa: E402
from coevo.models.fake import ScriptedChatModel  # noqa: E402

CALLS, CONCURRENCY, TASKS = 4, 32, 320


def overhead(runner: Callable[[Awaitable[Any]], Any], repeats: int) -> list[float]:
    """(a) ratios to the ideal, one per repeat, each in a fresh event loop made by ``runner``."""
    return [runner(be.engine_overhead(TASKS, CALLS, CONCURRENCY, 0.05, None))["ratio"] for _ in range(repeats)]


def without(name: str, repeats: int) -> list[float]:
    """(a) with one of the engine's two throughput measures switched off (diagnostic only):
    ``"direct call"``: every model call goes through LangChain's ``ainvoke`` (``areply``'s direct
    ``_agenerate`` path off); ``"heap freeze"``: no ``gc.freeze()`` around the evaluation."""
    import contextlib

    import coevo.compat as compat
    import coevo.evaluation.engine as evaluate

    target, attr, stand_in = {"direct call": (compat, "_unobserved", lambda model, messages, kwargs: False),
                              "heap freeze": (evaluate, "_frozen_heap", contextlib.nullcontext)}[name]
    original = getattr(target, attr)
    setattr(target, attr, stand_in)
    try:
        return overhead(asyncio.run, repeats)
    finally:
        setattr(target, attr, original)


async def per_rollout(repeats: int, rollouts: int = 100) -> dict[str, float]:
    """(b) sequential ms per rollout, min over ``repeats`` passes over ``rollouts`` tasks."""
    from langgraph.prebuilt import create_react_agent

    env, spec = be.LookupEnv(rollouts), be.spec(CALLS)
    tasks = env.tasks("val")
    model = ScriptedChatModel(script=[be.scripted_policy(CALLS)])
    react_model = ScriptedChatModel(script=[be.scripted_policy(CALLS)])

    def react(task: Task) -> Any:
        tools = [StructuredTool.from_function(func=t.fn, name=t.name, description=t.description,
                                              args_schema=t.parameters)
                 for t in env.episode(task).tools]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return create_react_agent(react_model, tools, prompt="Use the lookup tool, then answer.")

    shared = react(tasks[0])

    async def coevo_graph(task: Task) -> None:
        state = await build_harness_graph(spec, model, env.episode(task)).ainvoke({"task": task.prompt})
        assert state["answer"] == f"done-{task.id.split('-')[-1]}"

    async def react_per_rollout(task: Task) -> None:
        state = await react(task).ainvoke({"messages": [HumanMessage(task.prompt)]})
        assert len(state["messages"]) == 2 * CALLS

    async def react_once(task: Task) -> None:
        state = await shared.ainvoke({"messages": [HumanMessage(task.prompt)]})
        assert len(state["messages"]) == 2 * CALLS

    async def rollout(task: Task) -> None:
        assert (await arun_rollout(spec, model, env, task)).passed

    runs = {"coevo graph": coevo_graph, "react, built per rollout": react_per_rollout,
            "react, compiled once": react_once, "coevo arun_rollout (scored)": rollout}
    best: dict[str, float] = {}
    for _ in range(repeats):
        for name, run in runs.items():
            await run(tasks[0])
            started = time.perf_counter()
            for task in tasks:
                await run(task)
            best[name] = min(best.get(name, float("inf")), (time.perf_counter() - started) / len(tasks) * 1e3)
    return best


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1%} (min {min(values):.1%}, max {max(values):.1%}, n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = [("(a) evaluate, asyncio loop", spread(overhead(asyncio.run, args.repeats)))]
    try:
        import uvloop
        rows.append(("(a) evaluate, uvloop", spread(overhead(uvloop.run, args.repeats))))
    except ImportError:
        rows.append(("(a) evaluate, uvloop", "not installed"))
    rows.append(("(a) diagnostic: without the direct model call (every call through `ainvoke`)",
                 spread(without("direct call", args.repeats))))
    rows.append(("(a) diagnostic: without the heap freeze", spread(without("heap freeze", args.repeats))))
    b = asyncio.run(per_rollout(args.repeats))
    react = b["react, built per rollout"]
    rows += [(f"(b) {name}, zero-latency fake", f"{ms:.2f} ms/rollout ({ms / react:.2f}× react built per rollout)")
             for name, ms in b.items()]
    print(f"Harness engine diagnostics ({CALLS} calls/task; (a): concurrency {CONCURRENCY}, {TASKS} tasks, "
          f"fake 50 ms; ratio to ideal {CONCURRENCY / (0.05 * CALLS):.0f} tasks/s)\n")
    print("| measurement | result |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
