"""A CPU-bound fake env and a scripted policy for executor tests and benchmarks (importable by Ray
workers when ``tests/`` is on their ``PYTHONPATH``)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from coevo.envs.base import Episode, Score, Task, Tool
from coevo.harnesses import HarnessSpec
from coevo.models.fake import ScriptedChatModel

WORK = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def burn(cpu_s: float) -> None:
    """Spin on the CPU for ``cpu_s`` seconds of this process's CPU time."""
    end = time.process_time() + cpu_s
    while time.process_time() < end:
        pass


class BusyEnv:
    """Task i: call the ``work`` tool ``steps`` times (each call burns ``cpu_ms`` of CPU and returns
    ``7 * x``), then answer; the answer ``done-i`` passes for even i only, so rewards differ by task.
    ``die_on``: the first episode of that task id kills its own process (SIGKILL) — once, as recorded
    by the ``marker`` file — to stand for a worker lost mid-run."""

    name = "busy"

    def __init__(self, n: int, steps: int = 2, cpu_ms: float = 20.0, die_on: str | None = None,
                 marker: str | None = None) -> None:
        self.n, self.steps, self.cpu_ms, self.die_on, self.marker = n, steps, cpu_ms, die_on, marker

    def tasks(self, split: str, n: int | None = None) -> list[Task]:
        """Tasks ``t0..t{n-1}`` of ``split``."""
        return [Task(id=f"t{i}", env=self.name, split=split, prompt=f"Task {i}: call work {self.steps} times.")
                for i in range(self.n if n is None else min(n, self.n))]

    def _work(self, x: int) -> str:
        burn(self.cpu_ms / 1000)
        return f"result {7 * int(x)}"

    def episode(self, task: Task, seed: int = 0) -> Episode:
        """A fresh episode with the ``work`` tool (or the process's death, see class doc)."""
        if task.id == self.die_on and self.marker and not Path(self.marker).exists():
            Path(self.marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return Episode(task=task, tools=[Tool("work", "Do some work on x.", WORK, self._work)])

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """Pass iff the answer is ``done-i`` and i is even."""
        index = int(task.id[1:])
        ok = answer is not None and answer.strip() == f"done-{index}" and index % 2 == 0
        return Score(reward=1.0 if ok else 0.0, passed=ok, detail={"index": index})


def worker_reply(messages: list[BaseMessage]) -> AIMessage | str:
    """The scripted policy: ``work`` calls until the task's step count, then ``Final answer: done-i``."""
    task = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
    index, steps = int(task.split(":")[0].split()[-1]), int(task.split("work ")[1].split()[0])
    turn = sum(isinstance(m, AIMessage) for m in messages)
    if turn < steps:
        return AIMessage("", tool_calls=[{"name": "work", "args": {"x": index + turn}, "id": f"c{turn}"}])
    return f"Final answer: done-{index}"


def busy_policy(latency_s: float = 0.0, with_tokens: bool = False) -> ScriptedChatModel:
    """A ``ScriptedChatModel`` answering with ``worker_reply`` (fake token ids with ``with_tokens``)."""
    return ScriptedChatModel(script=[worker_reply], latency_s=latency_s, with_tokens=with_tokens)


def busy_spec(steps: int = 2) -> HarnessSpec:
    """A harness with room for ``steps`` tool calls and the answer."""
    return HarnessSpec(name="busy", prompt={"system": "Call the work tool, then answer."},
                       budget={"max_model_calls": steps + 2, "max_env_actions": steps + 2})
