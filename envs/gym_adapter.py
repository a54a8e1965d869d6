"""The ``gym`` adapter: a Gymnasium environment played through a ``step`` tool (``--env gym:ID``; extra ``gym``).

Reference: ``gym:FrozenLake-v1,size=40,seed=0`` — the env id first, then the adapter's settings
(``size``, ``seed``, ``val_frac``, ``test_frac``, ``actions``, ``success``, ``max_steps``) and any
other key, passed to ``gymnasium.make`` (``is_slippery=false``, ``map_name=8x8``).

Tasks: item ``i`` is the env reset with seed ``seed * 100000 + i``; its prompt says which env, the
actions and the first observation. A seed is a task of its own unless its reset leaves the env exactly
as an earlier seed's did: the same first observation and the same state (the unwrapped env's
attributes, its random generator aside; ``reset_state``) — so a deterministic start (FrozenLake
without slipping) is one task, while a game whose first observation hides what the seed drew (a
number to guess, the dealer's hole card, a shuffled deck) keeps every seed. An env whose state does
not pickle keeps every seed. Per episode: a fresh env reset with the task's
seed and one tool, ``step(action)``, which plays one action and returns the observation, the
step's reward and whether the episode ended. Score: passed when the episode *terminated* (not
truncated) with a last reward > 0 — the goal reached in FrozenLake, a delivery in Taxi, a won hand
in Blackjack — or, with ``success=X``, with a return >= X (CliffWalking: ``success=-100``).

Limits (stated in the README too):

- Text in, text out only: observations are a ``Text`` space's string, else the env's ``ansi``
  render (colour highlights written as ``[x|colour]``), else ``str(observation)``; actions are a
  ``Text`` space's string or a ``Discrete`` action named by ``actions`` (built in for FrozenLake,
  Taxi, CliffWalking and Blackjack) or by its number. Other action spaces raise ``ValueError``.
- Reward ``correct`` only (1 on the success rule); the agent's final text answer plays no part.
- Single-agent, one episode per task; no gold answer, so no demonstrations from these tasks.
- The env's own time limit (``TimeLimit``) truncates; ``max_steps`` sets it.
"""

from __future__ import annotations

import hashlib
import pickle
import re
from typing import Any

from coevo.envs.adapter import AdapterEnv
from coevo.envs.base import Episode, Score, Task, Tool
from coevo.envs.common import EnvRefError, require

ACTIONS: dict[str, list[str]] = {
    "FrozenLake": ["left", "down", "right", "up"],
    "FrozenLake8x8": ["left", "down", "right", "up"],
    "Taxi": ["south", "north", "east", "west", "pickup", "dropoff"],
    "CliffWalking": ["up", "right", "down", "left"],
    "Blackjack": ["stick", "hit"],
}
"""Action names of Gymnasium's toy-text envs (their documentation's order), keyed by env name."""

LEGENDS: dict[str, str] = {
    "FrozenLake": "Map: S start, F frozen, H hole, G goal; your square is marked 'on red'.",
    "Taxi": "Map: R, G, Y, B are stops; the passenger waits at the blue letter and goes to the magenta one; the "
            "taxi is the square 'on yellow' (empty) or 'on green' (with the passenger).",
    "CliffWalking": "Map: x is you, C the cliff, T the target.",
}
"""What the ``ansi`` render of a toy-text env shows, where colour carries meaning."""

COLOURS = {"30": "black", "31": "red", "32": "green", "33": "yellow", "34": "blue", "35": "magenta", "36": "cyan",
           "37": "white", "41": "on red", "42": "on green", "43": "on yellow", "44": "on blue", "45": "on magenta",
           "46": "on cyan", "47": "on white"}
_SPAN = re.compile(r"\x1b\[([\d;]*)m(.*?)\x1b\[0m", re.S)
_ANSI = re.compile(r"\x1b\[[\d;]*m")


def plain(text: str) -> str:
    """An ``ansi`` render as plain text: each coloured span ``x`` written ``[x|colour]``, other escapes dropped."""
    def span(m: re.Match[str]) -> str:
        names = [COLOURS[c] for c in m.group(1).split(";") if c in COLOURS]
        return f"[{m.group(2)}|{' '.join(names)}]" if names else m.group(2)

    return _ANSI.sub("", _SPAN.sub(span, text)).strip("\n")


def reset_state(env: Any) -> str | None:
    """A digest of what a reset left in ``env``: the unwrapped env's attributes (a random generator's
    aside, which differs by seed even where nothing draws from it), pickled; None when they do not pickle
    (a render window, a handle), so two such resets are never taken to be the same."""
    attrs = {k: v for k, v in vars(env.unwrapped).items() if "random" not in k}
    try:
        return hashlib.sha256(pickle.dumps(attrs)).hexdigest()
    except Exception:  # any attribute pickle refuses: nothing to compare
        return None


class GymEnv(AdapterEnv):
    """A Gymnasium env as a coevo suite (module doc). ``id``: the Gymnasium env id; ``make``: the
    other keyword arguments, passed to ``gymnasium.make``. Raises ``MissingExtraError`` without
    ``gymnasium``, ``ValueError`` for an action space it cannot play or a bad setting."""

    name = "gym"

    def __init__(self, id: str, size: int = 40, seed: int = 0, val_frac: float = 0.25, test_frac: float = 0.25,
                 actions: list[str] | str | None = None, success: float | None = None, max_steps: int | None = None,
                 reward: str = "correct", **make: Any) -> None:
        super().__init__(size, val_frac, test_frac, reward)
        self.gym = require("gymnasium", "gym", "gymnasium")
        self.id, self.seed, self.success, self.make_kwargs = str(id), seed, success, dict(make)
        if max_steps is not None:
            self.make_kwargs["max_episode_steps"] = max_steps
        family = self.id.split("/")[-1].split("-v")[0]
        try:
            probe = self.gym.make(self.id, **self.make_kwargs)
        except self.gym.error.Error as err:
            raise EnvRefError(f"gym env {self.id!r} cannot be made: {err}") from None
        self.ansi = "ansi" in (probe.metadata or {}).get("render_modes", [])
        try:
            self.text_actions = isinstance(probe.action_space, self.gym.spaces.Text)
            if not self.text_actions and not isinstance(probe.action_space, self.gym.spaces.Discrete):
                raise EnvRefError(f"gym env {self.id!r} has action space {probe.action_space}; this adapter plays Text "
                                  "or Discrete actions only")
            names = [actions] if isinstance(actions, str) else actions
            n = 0 if self.text_actions else int(probe.action_space.n)
            self.actions = [str(a).lower() for a in (names or ACTIONS.get(family) or range(n))]
            if not self.text_actions and len(self.actions) != n:
                raise EnvRefError(f"actions={names} names {len(self.actions)} actions but {self.id} has {n}; name "
                                  "each, in order")
        finally:
            probe.close()
        self.legend = LEGENDS.get(family, "")
        self._states: dict[int, str | None] = {}
        self.config.update(id=self.id, seed=seed, success=success, make=self.make_kwargs)

    def _make(self) -> Any:
        return self.gym.make(self.id, **({"render_mode": "ansi"} if self.ansi else {}), **self.make_kwargs)

    def _observe(self, env: Any, obs: Any) -> str:
        if isinstance(env.observation_space, self.gym.spaces.Text):
            return str(obs)
        if env.render_mode == "ansi":
            return plain(env.render())
        return str(obs)

    def _start(self, reset_seed: int) -> tuple[str, dict[str, Any]]:
        env = self._make()
        try:
            obs, _ = env.reset(seed=reset_seed)
            first = self._observe(env, obs)
            self._states[reset_seed] = reset_state(env)
        finally:
            env.close()
        how = ("Play one action per call with the step tool; actions: " + ", ".join(self.actions)
               if not self.text_actions else "Play one action per call with the step tool (free text).")
        prompt = "\n".join(t for t in (f"You are playing the Gymnasium environment {self.id}. {how}.", self.legend,
                                       f"Observation:\n{first}",
                                       "When the episode has ended, reply with your final answer: done.") if t)
        return prompt, {"gym_id": self.id, "reset_seed": reset_seed}

    def _identity(self, item: tuple[Any, str, dict[str, Any]]) -> str:
        """The prompt and the env's state after the reset (module doc); the seed itself when that state
        could not be read, so such seeds are never merged."""
        state = self._states.get(item[0])
        return f"{item[1]}\0{state if state is not None else f'seed {item[0]}'}"

    def _action(self, action: str) -> Any:
        if self.text_actions:
            return str(action)
        text = str(action).strip().lower()
        if text in self.actions:
            return self.actions.index(text)
        if text.isdigit() and int(text) < len(self.actions):
            return int(text)
        raise ValueError(f"unknown action {action!r}; one of {self.actions}")

    def episode(self, task: Task, seed: int = 0) -> Episode:
        """A fresh env reset with the task's seed and the ``step`` tool; ``state`` keeps the return,
        the last reward, ``terminated``/``truncated`` and the actions played (it survives ``close``)."""
        reset_seed = self.key(task)
        env = self._make()
        env.reset(seed=reset_seed)
        state: dict[str, Any] = {"return": 0.0, "last_reward": 0.0, "terminated": False, "truncated": False,
                                 "actions": []}

        def step(action: str) -> str:
            if state["terminated"] or state["truncated"]:
                return "The episode has ended; reply with your final answer."
            obs, r, terminated, truncated, _ = env.step(self._action(action))
            state["actions"].append(str(action))
            state.update(terminated=bool(terminated), truncated=bool(truncated), last_reward=float(r))
            state["return"] += float(r)
            text = f"{self._observe(env, obs)}\nReward: {float(r):g}"
            if terminated or truncated:
                text += f"\n[The episode has ended ({'terminated' if terminated else 'truncated'}); " \
                        f"return {state['return']:g}.]"
            return text

        described = ("one of " + ", ".join(self.actions)) if not self.text_actions else "the action text"
        tool = Tool("step", f"Play one action in {self.id} and see the new observation and reward.",
                    {"type": "object", "properties": {"action": {"type": "string", "description": described}},
                     "required": ["action"]}, step)
        return Episode(task=task, tools=[tool], state=state, closer=env.close)

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """Passed on the success rule (module doc); the text ``answer`` plays no part."""
        self.key(task)
        st = episode.state
        ok = bool(st.get("terminated")) and (st.get("last_reward", 0.0) > 0 if self.success is None
                                             else st.get("return", 0.0) >= self.success)
        public = {k: st.get(k) for k in ("return", "terminated", "truncated")}
        return self.verdict(ok, float(ok), {"got": list(st.get("actions", [])), "public": public})
