"""The ``verifiers`` adapter: a verifiers taskset's tasks as coevo tasks, its rewards as the score (extra verifiers).

Written for verifiers' v1 API (0.2 onwards; tested on 0.4.0): an environment is a ``Taskset`` of ``Task``s
(``TaskData`` plus ``@vf.reward``/``@vf.metric``/``@vf.stop`` methods), played by a ``Harness`` in a
``Runtime`` and composed by an ``Env`` whose ``run(task, agents)`` says how one task becomes one episode.
coevo takes the harness's place: its own harness graph is the agent, so verifiers' harness, runtime and
model-interception servers are not used. Two ways to name a taskset:

- ``verifiers:NAME`` — an installed taskset package (what ``prime env install`` or ``pip install`` puts on
  the path) or one that ships with verifiers (``verifiers.v1.tasksets.NAME``): the package's exported
  ``Taskset`` subclass, and its exported ``Env`` subclass when it has one (a game's ``run`` loop);
- ``verifiers:package.module:Taskset`` — a ``Taskset`` subclass by import path (when its module exports it
  as its one taskset, the module's exported ``Env`` subclass, if any, plays it).

The reference's other keys are the taskset config's fields, except the adapter's own: ``size``,
``val_frac``, ``test_frac``, ``success``, ``reward`` and ``eval_split``.

Tasks: the taskset's tasks in ``load()`` order (an infinite taskset is read up to ``size``). Without
``eval_split`` train tasks are the first ones and val/test the ones that follow; with it (a taskset whose
config has a ``split`` or ``dataset_split`` field), train tasks come from the taskset as configured and
val/test from the same taskset with that field set to ``eval_split`` (held-out rows; one whose prompt
repeats a train task is dropped, and the boundary stays between the two). A task's prompt is its system
prompt and prompt as text; its other data (the gold ``answer``, ``info``) stays inside the adapter.

Per episode: a fresh verifiers ``Trace`` holding the conversation, the task's tools (below), and the env's
``run(task, agents)``
running in the adapter's event loop with coevo as its one agent. Every turn-ending reply of coevo's agent
is one assistant turn; a multi-turn env (``agent.interaction(task)``: a game engine or a scripted user
answering each move) answers with the next user message (``coevo.envs.interaction``) until its loop
ends or a ``@vf.stop`` predicate on the trace fires. Score: the task's rewards (``Task.score``: the
weighted sum of its ``@vf.reward`` functions, metrics kept in the detail) plus what the env's ``run``
recorded itself; ``passed`` when that reward is >= ``success`` (default 0.5); ``reward=correct`` gives 1/0
on it, ``reward=partial`` the reward clipped to [0, 1].

Limits (stated in docs/how-to/own-env.md too):

- Text only: messages as text (image parts are dropped).
- Tools: the ``@vf.tool`` methods of the task's tool servers (``Task.toolsets``, fresh per episode and set
  up for its task) and of the taskset's shared ones (``Taskset.toolsets``, one instance) are the episode's
  tools, named as verifiers names them (``<server>_<tool>``), called in process on the trace's state
  (``self.state``) instead of through MCP servers in a runtime; each call and its result land on the trace.
  A tool server that needs its runtime (a sandbox, a container) is not supported.
- Refused with ``ValueError``: envs with more than one agent seat (a modelled user: ``user-sim``) and tasks
  without a prompt; rewards that need a runtime are skipped (as verifiers' own offline scoring does).
- An env's ``finalize`` (cross-agent judgement) does not run: one agent, one trace.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import uuid
import weakref
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from coevo.aio import LoopThread
from coevo.compat import vf_bare_env, vf_config_type, vf_tool_call, vf_tool_methods, vf_trace_stops
from coevo.envs.adapter import AdapterEnv
from coevo.envs.base import Episode, Score, Split, Task, Tool
from coevo.envs.common import EnvRefError, require, split_sizes
from coevo.envs.interaction import NEXT_USER_TURN

SPLIT_FIELDS = ("split", "dataset_split")
"""The taskset config fields ``eval_split`` sets (the dataset split a taskset loads)."""
TIMEOUT_S = 600.0
"""How long the adapter waits for the env's loop to ask for the next reply or finish."""
_CLOSED = object()


def message_text(message: Any) -> str:
    """A chat message's text (a verifiers message model or a dict): its string content, or the text
    parts of a list content (images dropped)."""
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", message)
    if isinstance(content, list):
        parts = (p if isinstance(p, dict) else p.model_dump() for p in content)
        return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
    return "" if content is None else str(content)


def prompt_text(system: str | None, prompt: Any) -> str:
    """A task's system prompt and prompt as one text: a string prompt as it is; chat messages joined by
    blank lines, each labelled with its role when they hold more than a system message and one user
    message (few-shot turns)."""
    head = [system] if system else []
    if isinstance(prompt, str):
        return "\n\n".join([*head, prompt])
    roles = [getattr(m, "role", None) or m.get("role") for m in prompt]
    plain = all(r in ("system", "user") for r in roles) and roles.count("user") <= 1
    body = [message_text(m) if plain else f"[{r}]\n{message_text(m)}" for r, m in zip(roles, prompt)]
    return "\n\n".join([*head, *body])


def _exported(module: Any, base: type) -> type | None:
    """The ``base`` subclass ``module`` exports through ``__all__`` (verifiers' plugin rule), or None."""
    found = [obj for name in getattr(module, "__all__", ()) if isinstance(obj := getattr(module, name, None), type)
             and issubclass(obj, base) and obj is not base]
    return found[0] if len(found) == 1 else None


class _Turns:
    """The hand-over between coevo (a sync caller) and the env's loop (in the adapter's event loop):
    the loop asks for a reply with an optional user message; coevo answers with its reply or closes."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.asks = loop, asyncio.Queue()  # type: ignore[var-annotated]
        self.reply: asyncio.Future | None = None

    async def ask(self, message: str | None) -> Any:
        """From the env's loop: hand ``message`` (None: the task's prompt) to coevo; returns its reply or
        ``_CLOSED``."""
        self.reply = self.loop.create_future()
        await self.asks.put(message)
        return await self.reply


class _Agent:
    """verifiers' ``Agent`` as an env's ``run`` uses it, played by coevo: ``run(task)`` takes one reply,
    ``interaction(task)`` one reply per ``turn``. Every message lands on the episode's trace."""

    def __init__(self, episode: "_Run") -> None:
        self.episode, self.trainable = episode, True

    async def run(self, task: Any, **_: Any) -> Any:
        """One segment: the reply to the task's prompt."""
        await self.episode.turn(None)
        return self.episode.trace

    @asynccontextmanager
    async def interaction(self, task: Any, **_: Any) -> AsyncIterator[Any]:
        """The exchange turn by turn: ``await interaction.turn(message)``."""
        yield self.episode


class _Agents:
    def __init__(self, name: str, agent: _Agent) -> None:
        self._name, self._agent = name, agent

    def __getattr__(self, name: str) -> _Agent:
        if name != self.__dict__["_name"]:
            raise AttributeError(f"no agent {name!r}; coevo plays the one seat {self.__dict__['_name']!r}")
        return self.__dict__["_agent"]


class _Run:
    """One episode's state on the verifiers side: the trace, the task's stop predicates and the turns."""

    def __init__(self, vf: Any, task: Any, turns: _Turns) -> None:
        from verifiers.v1.state import state_cls
        from verifiers.v1.trace import AgentInfo, Trace, TraceTask

        self.vf, self.task, self.turns, self.over = vf, task, turns, False
        self.trace = Trace(task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                           agent=AgentInfo(config=vf.AgentConfig()))
        self.trace.state = state_cls(type(task))()  # the rollout state the task's tools read and write
        self.stops = vf_trace_stops(task)
        if task.data.system_prompt:
            self._add(vf.SystemMessage(content=task.data.system_prompt))
        prompt = task.data.prompt
        for message in [vf.UserMessage(content=prompt)] if isinstance(prompt, str) else prompt:
            self._add(message)

    def _add(self, message: Any, sampled: bool = False) -> None:
        parent = len(self.trace.nodes) - 1 if self.trace.nodes else None
        self.trace.nodes.append(self.vf.MessageNode(parent=parent, message=message, sampled=sampled))

    def tool_turn(self, name: str, arguments: dict[str, Any], result: str) -> None:
        """A tool call of coevo's agent and its result, as verifiers records them."""
        call = self.vf.ToolCall(id=uuid.uuid4().hex[:12], name=name, arguments=json.dumps(arguments))
        self._add(self.vf.AssistantMessage(content="", tool_calls=[call]), sampled=True)
        self._add(self.vf.ToolMessage(tool_call_id=call.id, content=result, name=name))

    async def turn(self, message: str | None = None) -> Any:
        """verifiers' ``Interaction.turn``: send ``message`` (None: the prompt's turn) and return the
        reply as a ``Segment``; a terminated one once the exchange is over."""
        from verifiers.v1.agent import Segment

        if self.over or any([await stop(self.trace) for stop in self.stops]):
            self.over = True
            return Segment(messages=[], terminated=True)
        if message is not None:
            self._add(self.vf.UserMessage(content=message))
        reply = await self.turns.ask(message)
        if reply is _CLOSED:
            self.over = True
            return Segment(messages=[], terminated=True)
        answer = self.vf.AssistantMessage(content=reply)
        self._add(answer, sampled=True)
        return Segment(messages=[answer])


class VerifiersEnv(AdapterEnv):
    """A verifiers v1 taskset as a coevo suite (module doc). ``id``: a taskset id or
    ``package.module:Taskset``; ``taskset_args``: its config's fields. Raises ``MissingExtraError``
    without ``verifiers``, ``ValueError`` for a target that cannot be loaded, a bad config, an env with
    several agents, or a bad setting."""

    name = "verifiers"
    partial_ok = True

    def __init__(self, id: str, size: int = 40, val_frac: float = 0.25, test_frac: float = 0.25,
                 success: float = 0.5, reward: str = "correct", eval_split: str | None = None,
                 **taskset_args: Any) -> None:
        super().__init__(size, val_frac, test_frac, reward)
        require("verifiers", "verifiers", "verifiers")
        import verifiers.v1 as vf

        self.vf, self.id, self.success = vf, str(id), float(success)
        self.eval_split, self.taskset_args = eval_split, dict(taskset_args)
        self.taskset_cls, env_cls = self._classes()
        self.taskset = self._taskset(self.taskset_args)
        self.task_cls = self.taskset_cls.task_type()
        self.loop = LoopThread("coevo-verifiers", TIMEOUT_S)
        self._release = weakref.finalize(self, self.loop.close)  # the thread ends with the env
        self.shared = self.taskset_cls.toolsets(self.taskset.config)  # one instance for every episode
        for server in self.shared:
            self.loop.run(server.setup())
        self.bare = vf_bare_env(env_cls)
        if len(self.bare.seats) != 1:
            raise EnvRefError(f"verifiers env {env_cls.__name__} has {len(self.bare.seats)} agent seats "
                              f"({', '.join(self.bare.seats)}); the adapter plays envs with one agent (coevo's)")
        self.config.update(id=self.id, success=self.success, eval_split=eval_split, taskset_args=self.taskset_args)

    def close(self) -> None:
        """End the env's event-loop thread now (it ends anyway once the env is collected); the env
        cannot play afterwards."""
        self._release()

    def _classes(self) -> tuple[type, type]:
        from verifiers.v1.utils import loaders

        try:
            if ":" not in self.id:
                return loaders.taskset_class(self.id), loaders.environment_class(self.id)
            module_name, _, attr = self.id.partition(":")
            module = importlib.import_module(module_name)
            cls = getattr(module, attr)
        except (ImportError, AttributeError, TypeError, ValueError) as err:
            raise EnvRefError(f"verifiers target {self.id!r} cannot be loaded ({err}); write verifiers:NAME (an "
                              "installed taskset) or verifiers:package.module:Taskset") from None
        if not (isinstance(cls, type) and issubclass(cls, self.vf.Taskset)):
            raise EnvRefError(f"verifiers target {self.id!r} is a {type(cls).__name__}, not a verifiers Taskset class")
        from verifiers.v1.envs.single_agent import SingleAgentEnv

        own = _exported(module, self.vf.Taskset) is cls  # the module is cls's package: its Env plays it
        return cls, (_exported(module, self.vf.Env) if own else None) or SingleAgentEnv

    def _taskset(self, args: dict[str, Any]) -> Any:
        config_cls = vf_config_type(self.taskset_cls, self.vf.TasksetConfig, self.vf.Taskset)
        try:
            config = config_cls(**({"id": self.id} if ":" not in self.id else {}), **args)
        except Exception as err:  # pydantic's ValidationError: a field the taskset does not have, a bad value
            raise EnvRefError(f"verifiers taskset {self.id!r}: bad arguments {args}: {err}") from None
        return self.taskset_cls(config)

    def _split_field(self) -> str:
        fields = type(self.taskset.config).model_fields
        found = [f for f in SPLIT_FIELDS if f in fields]
        if not found:
            raise EnvRefError(f"eval_split={self.eval_split!r}: taskset {self.id!r} has no split field "
                              f"({' or '.join(SPLIT_FIELDS)}) to load its held-out rows from")
        return found[0]

    def _items(self) -> list[tuple[Any, str, dict[str, Any]]]:
        sizes = split_sizes(self.size, self.val_frac, self.test_frac)
        held = None
        if self.eval_split is not None:
            held = self._taskset({**self.taskset_args, self._split_field(): self.eval_split})
        n_train = sizes["train"] if held is not None else self.size
        rows = [("train", t) for t in itertools.islice(iter(self.taskset), n_train)]
        if held is not None:
            rows += [("eval", t) for t in itertools.islice(iter(held), self.size - n_train)]
        if not rows:
            raise EnvRefError(f"verifiers taskset {self.id!r} has no tasks with {self.taskset_args}")
        bare = [t for _, t in rows if t.data.prompt is None]
        if bare:
            raise EnvRefError(f"verifiers taskset {self.id!r} has tasks without a prompt (the user opens them); the "
                              "adapter plays prompted tasks")
        return [(task, prompt_text(task.data.system_prompt, task.data.prompt),
                 {"vf_taskset": self.id, "vf_dataset": which, "vf_idx": task.data.idx, "vf_name": task.data.name})
                for which, task in rows]

    def _sizes(self, items: list[tuple[Any, str, dict[str, Any]]]) -> dict[Split, int]:
        """Split sizes of the deduplicated ``items``: with held-out rows, train takes exactly the train
        rows and val/test share the held-out rows in the ratio ``val_frac : test_frac`` (each at least 1
        when there are 2 or more), so a dropped repeat never moves a row across the boundary; without,
        ``split_sizes``."""
        n_eval = sum(meta["vf_dataset"] == "eval" for _, _, meta in items)
        if not n_eval:
            return super()._sizes(items)
        share = self.val_frac / (self.val_frac + self.test_frac)
        n_val = round(n_eval * share)
        if n_eval >= 2 and 0 < share < 1:
            n_val = min(max(n_val, 1), n_eval - 1)
        return {"train": len(items) - n_eval, "val": n_val, "test": n_eval - n_val}

    def episode(self, task: Task, seed: int = 0) -> Episode:
        """The env's ``run`` on the task, started in the adapter's loop with coevo as its agent;
        ``state["next_user_turn"]`` plays its turns (module doc); ``state["vf_trace"]`` is the trace."""
        vf_task = self.key(task)
        turns = _Turns(self.loop.loop)
        run = _Run(self.vf, vf_task, turns)
        agents = _Agents(self.bare.seats[0], _Agent(run))
        tools = self._tools(vf_task, run)
        played = asyncio.run_coroutine_threadsafe(self._play(vf_task, agents), self.loop.loop)
        state: dict[str, Any] = {"vf_trace": run.trace, "run": run, "turns": turns, "played": played,
                                 "pending": self._next_ask(turns, played), "replies": 0}

        def next_turn(reply: str | None) -> str | None:
            if state["pending"] is None:
                return None
            self._answer(state, reply or "")
            state["pending"] = self._next_ask(turns, played)
            return state["pending"]

        state[NEXT_USER_TURN] = next_turn
        return Episode(task=task, tools=tools, state=state, closer=lambda: self._close(state))

    def _tools(self, vf_task: Any, run: _Run) -> list[Tool]:
        """The episode's tools: the ``@vf.tool`` methods of the task's tool servers (fresh for the episode,
        set up for its task) and of the taskset's shared ones, called in process on the trace's state;
        each call and its result land on the trace as an assistant tool call and a tool message."""
        from langchain_core.utils.function_calling import convert_to_openai_function

        servers = self.task_cls.toolsets(self.taskset.config.task)
        for server in servers:
            self.loop.run(server.setup())
            self.loop.run(server.setup_task(vf_task))
        tools = []
        for server in [*servers, *self.shared]:
            for name, fn in vf_tool_methods(server):
                def call(_name: str = name, _fn: Any = fn, **arguments: Any) -> str:
                    result = self.loop.run(vf_tool_call(_fn, run.trace.state, arguments))
                    text = result if isinstance(result, str) else json.dumps(result, default=str)
                    run.tool_turn(_name, arguments, text)
                    return text
                schema = convert_to_openai_function(fn)
                tools.append(Tool(name=name, description=(fn.__doc__ or schema.get("description") or name).strip(),
                                  parameters=schema["parameters"], fn=call, blocking=True))
        return tools

    async def _play(self, task: Any, agents: _Agents) -> None:
        await self.bare.env.setup(agents)
        await self.bare.env.run(task, agents)

    def _next_ask(self, turns: _Turns, played: Any) -> str | None:
        """Wait until the env's loop asks for a reply (its user message; the prompt's turn: "") or
        ends (None)."""

        async def wait() -> str | None:
            ask = asyncio.ensure_future(turns.asks.get())
            done = asyncio.wrap_future(played)
            finished, _ = await asyncio.wait({ask, done}, return_when=asyncio.FIRST_COMPLETED)
            if ask in finished:
                return ask.result() or ""
            ask.cancel()
            return None

        return self.loop.run(wait())

    def _answer(self, state: dict[str, Any], reply: Any) -> None:
        turns = state["turns"]
        self.loop.loop.call_soon_threadsafe(turns.reply.set_result, reply)
        state["replies"] += reply is not _CLOSED

    def _close(self, state: dict[str, Any]) -> None:
        """End the env's loop: an open ask is answered with "closed", then the loop is awaited."""
        while state["pending"] is not None:
            self._answer(state, _CLOSED)
            state["pending"] = self._next_ask(state["turns"], state["played"])
        state["played"].result(TIMEOUT_S)

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """The task's rewards on the trace (module doc). A final ``answer`` that no turn recorded (a
        single-turn episode scored without the conversation hook) is recorded first."""
        vf_task = self.key(task)
        state = episode.state
        if state["replies"] == 0 and answer is not None and state["pending"] is not None:
            self._answer(state, answer)
            state["pending"] = self._next_ask(state["turns"], state["played"])
        self._close(state)
        trace = state["vf_trace"]
        self.loop.run(vf_task.score(trace))
        reward = float(trace.reward)
        public = {"vf_reward": reward, "rewards": {k: r.value for k, r in trace.rewards.items() if r is not None},
                  "metrics": {k: v for k, v in trace.metrics.items() if v is not None}, "turns": trace.num_turns}
        return self.verdict(reward >= self.success, reward, {"got": answer, "public": public})
