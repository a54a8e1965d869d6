"""Evaluation-engine benchmarks (issue 4, Performance), measured side by side in one run.

(a) Engine overhead: a fake policy with a fixed 50 ms latency (``ScriptedChatModel(latency_s=0.05)``)
    on a tool task of ``--calls`` model calls per rollout, evaluated at concurrency 32. Throughput
    (rollouts/s) against the ideal ``32 / (0.05 s × calls)``; target ≥ 90 %. Measured without and
    with the archive (trajectories persisted as tasks finish).
(b) Zero-latency fake policy: coevo's harness graph vs ``langgraph.prebuilt.create_react_agent`` on
    the same tool task and the same scripted replies (each graph built per rollout, since tools are
    per episode); ratio of wall time per rollout (target ≤ 1.0: coevo no slower).
(c) Archive: 1,000 trajectories of 10 turns (fake token ids and logprobs on) from a fake-50 ms
    evaluation at concurrency 32; persisting them one task per transaction (the worst case of
    ``evaluate``'s group commit) into a fresh SQLite archive vs the evaluation's wall time, and vs
    the ideal evaluation time (no engine overhead); also in groups of 32 tasks; target < 5 %.

    python benchmarks/bench_engine.py [--quick]

Prints a markdown table. Numbers depend on the CPU (the engine's overhead is Python time).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("LANGGRAPH_NO_VERSION_CHECK", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402

from coevo.envs.base import Episode, Score, Task, Tool  # noqa: E402
from coevo.evaluation.engine import evaluate  # noqa: E402
from coevo.harnesses import HarnessSpec  # noqa: E402
from coevo.harnesses.runtime import build_harness_graph  # noqa: E402
from coevo.models.fake import ScriptedChatModel  # noqa: E402
from coevo.records import Trajectory  # noqa: E402
from coevo.storage import Archive  # noqa: E402

LOOKUP = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}


class LookupEnv:
    """Task i: look up ``calls - 1`` keys with the ``lookup`` tool, then answer ``done-i``."""

    name = "lookup"

    def __init__(self, n: int) -> None:
        self.n = n

    def tasks(self, split: str, n: int | None = None) -> list[Task]:
        return [Task(id=f"{split}-{i}", env=self.name, split=split, prompt=f"Task {i}: look up the keys, then answer.")
                for i in range(self.n if n is None else min(n, self.n))]

    def episode(self, task: Task, seed: int = 0) -> Episode:
        return Episode(task=task, tools=[Tool("lookup", "Look a key up.", LOOKUP, lambda key: f"value of {key}")])

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        ok = answer is not None and answer.strip() == f"done-{task.id.split('-')[-1]}"
        return Score(reward=1.0 if ok else 0.0, passed=ok)


def scripted_policy(calls: int):
    """Replies: ``calls - 1`` tool calls, then the final answer (decided from the message history)."""

    def reply(messages: list[BaseMessage]) -> AIMessage | str:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        task = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
        index = task.split(":")[0].split()[-1]
        if turn < calls - 1:
            return AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": f"k{turn}"}, "id": f"call-{turn}"}])
        return f"Final answer: done-{index}"

    return reply


def spec(calls: int) -> HarnessSpec:
    return HarnessSpec(name="bench", prompt={"system": "Use the lookup tool, then answer."},
                       budget={"max_model_calls": calls + 2, "max_env_actions": calls + 2})


async def engine_overhead(tasks: int, calls: int, concurrency: int, latency: float,
                          db: Path | None) -> dict[str, float]:
    """(a): rollouts/s at ``concurrency`` vs the ideal ``concurrency / (latency × calls)``."""
    model = ScriptedChatModel(script=[scripted_policy(calls)], latency_s=latency)
    archive = Archive(db) if db else None
    started = time.perf_counter()
    result = await evaluate(spec(calls), "fake-50ms", LookupEnv(tasks), "val", model=model, archive=archive,
                            concurrency=concurrency)
    wall = time.perf_counter() - started
    assert result.pass_at_k == 1.0 and result.model_turns == tasks * calls, result
    ideal = concurrency / (latency * calls)
    return {"wall_s": wall, "throughput": tasks / wall, "ideal": ideal, "ratio": tasks / wall / ideal}


async def coevo_vs_react(rollouts: int, calls: int) -> dict[str, float]:
    """(b): seconds per rollout, zero-latency fake policy, sequential, graph built per rollout."""
    from langgraph.prebuilt import create_react_agent

    env, harness = LookupEnv(rollouts), spec(calls)
    tasks = env.tasks("val")
    coevo_model = ScriptedChatModel(script=[scripted_policy(calls)])
    react_model = ScriptedChatModel(script=[scripted_policy(calls)])

    async def coevo_run(task: Task) -> None:
        state = await build_harness_graph(harness, coevo_model, env.episode(task)).ainvoke({"task": task.prompt})
        assert state["answer"].startswith("done-"), state.get("stop_reason")

    async def react_run(task: Task) -> None:
        tools = [StructuredTool.from_function(func=t.fn, name=t.name, description=t.description,
                                              args_schema=t.parameters)
                 for t in env.episode(task).tools]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            agent = create_react_agent(react_model, tools, prompt="Use the lookup tool, then answer.")
        state = await agent.ainvoke({"messages": [HumanMessage(task.prompt)]})
        assert isinstance(state["messages"][-1], AIMessage) and len(state["messages"]) == 2 * calls, state["messages"]

    timings: dict[str, float] = {}
    for name, run in (("coevo", coevo_run), ("react", react_run)):
        await run(tasks[0])  # warm-up (imports, first compile)
    for name, run in (("coevo", coevo_run), ("react", react_run), ("coevo2", coevo_run), ("react2", react_run)):
        started = time.perf_counter()
        for task in tasks:
            await run(task)
        timings[name] = (time.perf_counter() - started) / len(tasks)
    coevo, react = min(timings["coevo"], timings["coevo2"]), min(timings["react"], timings["react2"])
    return {"coevo_ms": coevo * 1e3, "react_ms": react * 1e3, "ratio": coevo / react}


class Collector:
    """Duck-typed stand-in for ``Archive`` that keeps trajectories in memory (no SQL cost)."""

    def __init__(self) -> None:
        self.trajectories_: list[Any] = []

    def get(self, kind: Any, id: str) -> None:
        return None

    def add_harness(self, *args: Any) -> None:
        pass

    def put(self, *records: Any) -> None:
        pass

    def add_trajectories(self, trajs: Any, evaluation_id: str | None = None, run_id: str | None = None) -> None:
        self.trajectories_ += trajs


async def archive_cost(tasks: int, turns: int, concurrency: int, latency: float, workdir: Path) -> dict[str, float]:
    """(c): persist ``tasks`` trajectories of ``turns`` turns (one transaction each) vs their evaluation."""
    model = ScriptedChatModel(script=[scripted_policy(turns)], latency_s=latency, with_tokens=True)
    collector = Collector()
    started = time.perf_counter()
    result = await evaluate(spec(turns), "fake-50ms", LookupEnv(tasks), "val", model=model, concurrency=concurrency,
                            archive=collector)  # type: ignore[arg-type]
    eval_s = time.perf_counter() - started
    trajs = collector.trajectories_
    assert result.model_turns == tasks * turns and len(trajs) == tasks
    archive = Archive(workdir / "bench_c.db")
    started = time.perf_counter()
    for traj in trajs:
        archive.add_trajectories([traj], evaluation_id="bench")
    persist_s = time.perf_counter() - started
    assert archive.count(Trajectory, evaluation_id="bench") == tasks
    grouped = Archive(workdir / "bench_c_group.db")
    started = time.perf_counter()
    for i in range(0, len(trajs), concurrency):
        grouped.add_trajectories(trajs[i:i + concurrency], evaluation_id="bench")
    group_s = time.perf_counter() - started
    size_mb = sum(p.stat().st_size for p in workdir.glob("bench_c.db*")) / 1e6
    tokens = sum(len(c.prompt_token_ids or []) + len(c.completion_token_ids or []) for t in trajs for c in t.calls)
    ideal_s = tasks * turns * latency / concurrency
    return {"eval_s": eval_s, "persist_s": persist_s, "ratio": persist_s / eval_s, "ideal_s": ideal_s,
            "group_s": group_s, "ideal_ratio": persist_s / ideal_s, "mb": size_mb, "token_ids": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Smaller sizes (a smoke run, not the reported figures).")
    parser.add_argument("--calls", type=int, default=4, help="Model calls per rollout in (a) and (b).")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    tasks_a, rollouts_b, tasks_c = (64, 20, 100) if args.quick else (320, 100, 1000)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        a = asyncio.run(engine_overhead(tasks_a, args.calls, args.concurrency, 0.05, None))
        a_db = asyncio.run(engine_overhead(tasks_a, args.calls, args.concurrency, 0.05, work / "bench_a.db"))
        b = asyncio.run(coevo_vs_react(rollouts_b, args.calls))
        c = asyncio.run(archive_cost(tasks_c, 10, args.concurrency, 0.05, work))
    ok = lambda good: "yes" if good else "**no**"  # noqa: E731
    print(f"Engine benchmarks ({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"python {platform.python_version()})\n")
    print("| benchmark | measured | reference | ratio | target | met |")
    print("|---|---|---|---|---|---|")
    print(f"| (a) fake 50 ms, {args.calls} calls/task, concurrency {args.concurrency}, {tasks_a} tasks | "
          f"{a['throughput']:.1f} tasks/s | ideal {a['ideal']:.1f} tasks/s | {a['ratio']:.1%} | ≥ 90% | "
          f"{ok(a['ratio'] >= 0.9)} |")
    print(f"| (a') same, persisting to the archive | {a_db['throughput']:.1f} tasks/s | "
          f"ideal {a_db['ideal']:.1f} tasks/s | {a_db['ratio']:.1%} | ≥ 90% | {ok(a_db['ratio'] >= 0.9)} |")
    print(f"| (b) zero-latency fake, {args.calls} calls/task, coevo graph vs create_react_agent | "
          f"{b['coevo_ms']:.2f} ms/rollout | react {b['react_ms']:.2f} ms/rollout | {b['ratio']:.2f}× | ≤ 1.0× | "
          f"{ok(b['ratio'] <= 1.0)} |")
    print(f"| (c) persist {tasks_c} trajectories × 10 turns ({c['token_ids'] / 1e6:.1f} M token ids, "
          f"{c['mb']:.0f} MB) | {c['persist_s']:.2f} s | fake-50 ms eval {c['eval_s']:.1f} s | {c['ratio']:.1%} | "
          f"< 5% | {ok(c['ratio'] < 0.05)} |")
    print(f"| (c') same persist vs the ideal eval time (zero engine overhead) | {c['persist_s']:.2f} s | "
          f"ideal {c['ideal_s']:.1f} s | {c['ideal_ratio']:.1%} | < 5% | {ok(c['ideal_ratio'] < 0.05)} |")
    print(f"| (c'') same, group commits of {args.concurrency} tasks, vs the ideal eval time | {c['group_s']:.2f} s | "
          f"ideal {c['ideal_s']:.1f} s | {c['group_s'] / c['ideal_s']:.1%} | < 5% | "
          f"{ok(c['group_s'] / c['ideal_s'] < 0.05)} |")


if __name__ == "__main__":
    main()
