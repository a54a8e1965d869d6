"""The ``openenv`` adapter: an OpenEnv environment played through a ``step`` tool (extra ``openenv``).

Two ways to reach one (package ``openenv-core``):

- in process: ``openenv:package.module:EnvClass`` — an ``openenv.core.env_server.interfaces.Environment``
  subclass, built with the reference's other keys as keyword arguments (``EnvClass(**kwargs)``),
  its action model read from ``step``'s annotation (or named with ``action=package.module:Action``);
- through its client: ``openenv:url=http://host:8000`` — a running OpenEnv server (``openenv serve``,
  a Docker image, a Space) reached with OpenEnv's ``GenericEnvClient`` (WebSocket sessions, one per
  episode), its action schema read from the server's ``/schema``.

Tasks: item ``i`` is the environment reset with seed ``seed * 100000 + i``; its prompt holds the
environment's description (``instructions=`` replaces it) and the first observation. Items whose
prompt repeats an earlier one are one task (an environment whose reset ignores the seed gives one
task). Per episode: a fresh environment (or client session), reset with the task's seed, and one tool,
``step(...)``, whose arguments are the action model's fields; it returns the observation (JSON of its
fields), the reward and whether the episode is done. Score: with ``success=X``, passed when the
return (the summed step rewards) is >= X; else passed when the episode is done with a last reward > 0.

Limits (stated in the README too): one action type, sent as the ``step`` tool's JSON arguments (no
MCP tools or production mode); observations as JSON text (no images); reward ``correct`` only; the
agent's final text answer plays no part; no gold answer (no demonstrations); a reset's ``seed`` is
honoured only by environments that read it.
"""

from __future__ import annotations

import importlib
import inspect
import json
from typing import Any, get_type_hints

from coevo.envs.adapter import AdapterEnv
from coevo.envs.base import Episode, Score, Task, Tool
from coevo.envs.common import EnvRefError, require

HIDDEN = ("done", "reward", "metadata")
"""Observation and action fields that are protocol, not content."""


def _import(target: str) -> Any:
    module, _, attr = str(target).partition(":")
    if not attr:
        raise EnvRefError(f"openenv target {target!r}: write package.module:ClassName")
    return getattr(importlib.import_module(module), attr)


class _Local:
    """One in-process episode: an ``Environment`` instance and its action model."""

    def __init__(self, env: Any, action_cls: Any) -> None:
        self.env, self.action_cls = env, action_cls

    def reset(self, seed: int) -> tuple[dict[str, Any], float, bool]:
        params = inspect.signature(self.env.reset).parameters  # as OpenEnv's server does: seed only if read
        takes = "seed" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
        return _unpack(self.env.reset(seed=seed) if takes else self.env.reset())

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float, bool]:
        return _unpack(self.env.step(self.action_cls(**action)))

    def close(self) -> None:
        self.env.close()


class _Remote:
    """One episode over OpenEnv's client (a WebSocket session of its own)."""

    def __init__(self, url: str, core: Any) -> None:
        self.client = core.GenericEnvClient(base_url=url).sync()
        self.client.connect()

    def reset(self, seed: int) -> tuple[dict[str, Any], float, bool]:
        result = self.client.reset(seed=seed)
        return dict(result.observation or {}), float(result.reward or 0.0), bool(result.done)

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float, bool]:
        result = self.client.step(action)
        return dict(result.observation or {}), float(result.reward or 0.0), bool(result.done)

    def close(self) -> None:
        self.client.close()


def _unpack(obs: Any) -> tuple[dict[str, Any], float, bool]:
    return obs.model_dump(), float(obs.reward or 0.0), bool(obs.done)


def observation_text(obs: dict[str, Any]) -> str:
    """An observation's content as text: its one string field, else the JSON of its fields (protocol
    fields ``done``, ``reward``, ``metadata`` left out)."""
    shown = {k: v for k, v in obs.items() if k not in HIDDEN}
    if len(shown) == 1 and isinstance(next(iter(shown.values())), str):
        return next(iter(shown.values()))
    return json.dumps(shown, default=str, sort_keys=True)


class OpenEnvEnv(AdapterEnv):
    """An OpenEnv environment as a coevo suite (module doc). Exactly one of ``id`` (in process) and
    ``url`` (a server). Raises ``MissingExtraError`` without ``openenv-core``, ``ValueError`` for a bad
    target, both or neither of ``id``/``url``, or an action model it cannot find."""

    name = "openenv"

    def __init__(self, id: str | None = None, url: str | None = None, action: str | None = None, size: int = 40,
                 seed: int = 0, val_frac: float = 0.25, test_frac: float = 0.25, success: float | None = None,
                 instructions: str = "", reward: str = "correct", **kwargs: Any) -> None:
        super().__init__(size, val_frac, test_frac, reward)
        self.core = require("openenv.core", "openenv", "openenv-core")
        if (id is None) == (url is None):
            raise EnvRefError("openenv needs one target: openenv:package.module:EnvClass (in process) or "
                              "openenv:url=http://host:8000 (a running server)")
        self.url, self.seed, self.success, self.kwargs = url, seed, success, kwargs
        if id is not None:
            self.env_cls = _import(id)
            self.action_cls = _import(action) if action else get_type_hints(self.env_cls.step).get("action")
            if not (isinstance(self.action_cls, type) and hasattr(self.action_cls, "model_json_schema")):
                raise EnvRefError(f"openenv {id!r}: step() names no action model; pass action=package.module:Action")
            schema = self.action_cls.model_json_schema()
            probe = self.env_cls(**kwargs)
            meta = probe.get_metadata()
            probe.close()
            self.description = instructions or f"{meta.name}: {meta.description}"
        else:
            import httpx

            schema = httpx.get(f"{url.rstrip('/')}/schema", timeout=10).json()["action"]
            self.description = instructions or f"the OpenEnv environment at {url}"
        self.parameters = {"type": "object", "required": [r for r in schema.get("required", []) if r not in HIDDEN],
                           "properties": {k: v for k, v in schema.get("properties", {}).items() if k not in HIDDEN}}
        self.config.update(id=id, url=url, seed=seed, success=success, kwargs=kwargs)

    def _session(self) -> _Local | _Remote:
        if self.url is not None:
            return _Remote(self.url, self.core)
        return _Local(self.env_cls(**self.kwargs), self.action_cls)

    def _start(self, reset_seed: int) -> tuple[str, dict[str, Any]]:
        session = self._session()
        try:
            obs, _, _ = session.reset(reset_seed)
        finally:
            session.close()
        fields = ", ".join(self.parameters["properties"]) or "none"
        prompt = (f"You are acting in {self.description}\nAct with the step tool (its arguments: {fields}); "
                  f"each call is one action.\nObservation:\n{observation_text(obs)}\n"
                  "When you are done, reply with your final answer: done.")
        return prompt, {"reset_seed": reset_seed}

    def episode(self, task: Task, seed: int = 0) -> Episode:
        """A fresh environment (or client session) reset with the task's seed and the ``step`` tool;
        ``state`` keeps the return, the last reward, ``done`` and the actions sent (it survives ``close``)."""
        session = self._session()
        session.reset(self.key(task))
        state: dict[str, Any] = {"return": 0.0, "last_reward": 0.0, "done": False, "actions": []}

        def step(**action: Any) -> str:
            if state["done"]:
                return "The episode is done; reply with your final answer."
            obs, r, done = session.step(action)
            state["actions"].append(action)
            state.update(done=done, last_reward=r)
            state["return"] += r
            text = f"{observation_text(obs)}\nReward: {r:g}"
            return text + (f"\n[The episode is done; return {state['return']:g}.]" if done else "")

        tool = Tool("step", f"Send one action to {self.description.split(':')[0]} and see the observation.",
                    self.parameters, step, blocking=self.url is not None)
        return Episode(task=task, tools=[tool], state=state, closer=session.close)

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """Passed on the success rule (module doc); the text ``answer`` plays no part."""
        self.key(task)
        st = episode.state
        ok = (st.get("return", 0.0) >= self.success if self.success is not None
              else bool(st.get("done")) and st.get("last_reward", 0.0) > 0)
        public = {k: st.get(k) for k in ("return", "done")}
        return self.verdict(ok, float(ok), {"got": list(st.get("actions", [])), "public": public})
