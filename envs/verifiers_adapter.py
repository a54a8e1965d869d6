"""The ``verifiers`` adapter: a verifiers environment's dataset as tasks, its rubric as the score (extra ``verifiers``).

Two ways to name one (package ``verifiers``, Prime Intellect's environment library):

- ``verifiers:NAME`` — an installed environment package (what ``vf-install NAME`` or ``pip install``
  puts on the path): ``verifiers.load_environment(NAME, **env_args)``, which imports the module
  ``NAME`` and calls its ``load_environment``;
- ``verifiers:package.module:factory`` — any callable returning a ``verifiers.Environment``
  (an environment class that ships inside a library, e.g.
  ``verifiers:verifiers.envs.integrations.reasoninggym_env:ReasoningGymEnv,gym=basic_arithmetic``).

The reference's other keys are the environment's arguments, except the adapter's own: ``size``,
``val_frac``, ``test_frac``, ``success`` and ``reward``.

Tasks: the environment's dataset rows. Train tasks are the first rows of its train ``dataset``;
val and test tasks come from its ``eval_dataset`` when it has one (held-out rows; an eval row whose
prompt repeats a train row is dropped, and the boundary stays between the two datasets), else from
the train rows that follow. A task's prompt is the row's ``prompt`` messages (the environment's system
prompt, few-shot turns and question) as text; the row's ``answer`` and ``info`` stay inside the
adapter (they can hold the gold answer). Per episode: a fresh verifiers rollout state
(``init_state`` and ``setup_state``). Every reply of the agent that ends a turn is one verifiers
model turn (a trajectory step); while the environment's stop conditions say the rollout goes on,
its ``env_response`` is the next user message (``coevo.envs.interaction``), so multi-turn
environments (``MultiTurnEnv``: games, user simulators, feedback loops) play turn by turn. Score:
the environment's rubric (``score_rollout``: the weighted sum of its reward functions, metrics
kept in the detail) on the rendered completion. ``passed`` when that reward is >= ``success``
(default 0.5, verifiers' own pass threshold in later releases); ``reward=correct`` gives 1/0 on it,
``reward=partial`` the rubric's reward clipped to [0, 1].

Limits (stated in the README too):

- Tested on verifiers 0.1.10 (the 0.1 API this adapter speaks; 0.1.11 to 0.2.0 cap datasets below
  TRL's 4.7); environments written for the 0.2+ API (``tool_defs``, ``verifiers.v1`` tasksets) do not
  load on it.
- Text only: chat prompts and replies as text (image parts are dropped from a prompt); completion
  environments (``message_type="completion"``) get the reply as the completion string.
- No tools: environments that offer tools (``ToolEnv``, ``StatefulToolEnv``, sandbox and MCP
  environments) are refused with ``ValueError``; their tool loop is not mapped onto coevo's tools.
- Group rubrics (rewards computed over a group of rollouts) are not supported: ``score_rollout``
  scores one rollout; a rubric judged by an LLM (``JudgeRubric``) needs its judge's endpoint.
- An environment is made on the main thread (verifiers installs SIGINT/SIGTERM handlers when one
  is made; the adapter puts coevo's own back afterwards).
"""

from __future__ import annotations

import asyncio
import importlib
import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from coevo.compat import vf_cleanup
from coevo.envs.adapter import AdapterEnv
from coevo.envs.base import Episode, Score, Split, Task
from coevo.envs.common import require, split_sizes
from coevo.envs.interaction import NEXT_USER_TURN


class _Loop:
    """One event loop in a daemon thread: verifiers' coroutines run there from sync code, also when the
    caller is itself inside a running loop (the harness graph under ``ainvoke``)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="coevo-verifiers", daemon=True).start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


@contextmanager
def _kept_signals() -> Iterator[None]:
    """Put SIGINT's and SIGTERM's handlers back after the block (a verifiers ``Environment`` replaces them)."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


def message_text(message: Any) -> str:
    """A chat message's text: its string content, or the text parts of a list content (images dropped)."""
    content = message.get("content") if isinstance(message, dict) else message
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def prompt_text(prompt: Any) -> str:
    """A dataset row's ``prompt`` as one text: a completion prompt as it is; chat messages joined by
    blank lines, each labelled with its role when the prompt holds more than a system message and a
    user message (few-shot turns)."""
    if isinstance(prompt, str):
        return prompt
    roles = [m.get("role") for m in prompt]
    plain = all(r in ("system", "user") for r in roles) and roles.count("user") <= 1
    return "\n\n".join(message_text(m) if plain else f"[{m.get('role')}]\n{message_text(m)}" for m in prompt)


def _factory(target: str, vf: Any) -> Any:
    if ":" not in target:
        return lambda **kwargs: vf.load_environment(target, **kwargs)
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"verifiers target {target!r} cannot be imported ({err}); write verifiers:NAME (an "
                         "installed environment) or verifiers:package.module:factory") from None


class VerifiersEnv(AdapterEnv):
    """A verifiers environment as a coevo suite (module doc). ``id``: an installed environment's name or
    ``package.module:factory``; ``env_args``: the environment's own arguments. Raises
    ``MissingExtraError`` without ``verifiers``, ``ValueError`` for a target that cannot be loaded, an
    object that is not a ``verifiers.Environment``, an environment with tools or group rewards, or a
    bad setting."""

    name = "verifiers"
    partial_ok = True

    def __init__(self, id: str, size: int = 40, val_frac: float = 0.25, test_frac: float = 0.25,
                 success: float = 0.5, reward: str = "correct", **env_args: Any) -> None:
        super().__init__(size, val_frac, test_frac, reward)
        self.vf = require("verifiers", "verifiers", "verifiers")
        self.id, self.success, self.env_args = str(id), float(success), dict(env_args)
        factory = _factory(self.id, self.vf)
        with _kept_signals():
            try:
                env = factory(**self.env_args)
            except Exception as err:  # a user's factory may raise anything (verifiers' loader: Runtime/Value/TypeError)
                raise ValueError(f"verifiers env {self.id!r} could not be made with {self.env_args}: {err}") from err
        if not isinstance(env, self.vf.Environment):
            raise ValueError(f"verifiers target {self.id!r} made a {type(env).__name__}, not a verifiers Environment")
        if getattr(env, "oai_tools", None):
            raise ValueError(f"verifiers env {self.id!r} offers tools ({', '.join(self._tool_names(env))}); the "
                             "verifiers adapter plays environments without tools only")
        self.env, self.chat = env, env.message_type == "chat"
        self.loop = _Loop()
        self.config.update(id=self.id, success=self.success, env_args=self.env_args)

    @staticmethod
    def _tool_names(env: Any) -> list[str]:
        return [str(t.get("function", {}).get("name", "?")) for t in env.oai_tools]

    def _items(self) -> list[tuple[Any, str, dict[str, Any]]]:
        sizes = split_sizes(self.size, self.val_frac, self.test_frac)
        train, held = self.env.build_dataset(), self.env.build_eval_dataset()
        if train is None:  # an environment with an eval dataset only (or none: no rows, refused below)
            train, held = held if held is not None else [], None
        n_train = sizes["train"] if held is not None else self.size
        rows = [("train", i, train[i]) for i in range(min(n_train, len(train)))]
        if held is not None:
            rows += [("eval", i, held[i]) for i in range(min(self.size - n_train, len(held)))]
        if not rows:
            raise ValueError(f"verifiers env {self.id!r} has no dataset rows (its dataset and eval_dataset are "
                             f"empty with {self.env_args}); check the environment's arguments")
        return [(row, prompt_text(row["prompt"]),
                 {"vf_env": self.id, "vf_dataset": which, "vf_row": i, "vf_task": row.get("task")})
                for which, i, row in rows]

    def _sizes(self, items: list[tuple[Any, str, dict[str, Any]]]) -> dict[Split, int]:
        """Split sizes of the deduplicated ``items``: with eval rows, train takes exactly the train rows
        and val/test share the eval rows in the ratio ``val_frac : test_frac`` (each at least 1 when
        there are 2 or more and its fraction is positive), so a row dropped as a repeat or a short
        dataset never moves a train row into val/test or an eval row into train; without, ``split_sizes``."""
        n_eval = sum(meta["vf_dataset"] == "eval" for _, _, meta in items)
        if not n_eval:
            return super()._sizes(items)
        share = self.val_frac / (self.val_frac + self.test_frac)  # > 0: eval rows are taken only for val/test
        n_val = round(n_eval * share)
        if n_eval >= 2 and 0 < share < 1:
            n_val = min(max(n_val, 1), n_eval - 1)
        return {"train": len(items) - n_eval, "val": n_val, "test": n_eval - n_val}

    def episode(self, task: Task, seed: int = 0) -> Episode:
        """A fresh verifiers rollout state for the task's row; ``state["next_user_turn"]`` plays the
        environment's responses (module doc); ``state["vf_state"]`` is verifiers' own state."""
        row = {k: v for k, v in self.key(task).items() if k in ("prompt", "answer", "task", "info", "example_id")}
        vf_state = self.loop.run(self.env.init_state(row, client=None, model="coevo"))
        vf_state = self.loop.run(self.env.setup_state(vf_state)) or vf_state
        state: dict[str, Any] = {"vf_state": vf_state, "messages": row["prompt"], "done": False, "turns": 0}

        def next_turn(reply: str | None) -> str | None:
            if state["done"]:
                return None
            self._record(state, reply)
            if self.loop.run(self.env.is_completed(vf_state)):
                state["done"] = True
                return None
            response = self.loop.run(self.env.env_response(state["messages"], vf_state))
            if vf_state.get("final_env_response") is not None:
                state["done"] = True
                return None
            state["messages"] = self._join(state["messages"], response)
            return "\n\n".join(message_text(m) for m in response) if isinstance(response, list) else str(response)

        state[NEXT_USER_TURN] = next_turn
        return Episode(task=task, state=state, closer=lambda: self._close(state))

    def _join(self, messages: Any, more: Any) -> Any:
        return messages + more if isinstance(messages, list) and isinstance(more, list) else f"{messages}{more}"

    def _record(self, state: dict[str, Any], reply: str | None) -> None:
        """Append the agent's turn-ending reply as one verifiers trajectory step."""
        vf_state = state["vf_state"]
        text = reply or ""
        completion: Any = [{"role": "assistant", "content": text}] if self.chat else text
        step = {"prompt": state["messages"], "completion": completion, "response": None, "tokens": None,
                "reward": None, "advantage": None, "is_truncated": False,
                "trajectory_id": vf_state["trajectory_id"], "extras": {}}
        self.loop.run(self.env.add_trajectory_step(vf_state, step))
        state["messages"] = self._join(state["messages"], completion)
        state["turns"] += 1

    def _close(self, state: dict[str, Any]) -> None:
        vf_state = state["vf_state"]
        if not vf_state.get("is_completed"):  # a rollout cut short still releases its resources
            self.loop.run(vf_cleanup(self.env, vf_state))
            vf_state["is_completed"] = True

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """The rubric's reward on the rollout (module doc). A final ``answer`` that no turn recorded
        (a single-turn episode scored without the conversation hook) is recorded first."""
        self.key(task)
        state = episode.state
        vf_state = state["vf_state"]
        if state["turns"] == 0 and answer is not None:
            self._record(state, answer)
        if not vf_state.get("is_completed"):
            self.loop.run(self.env.is_completed(vf_state))
        self.loop.run(self.env.render_completion(vf_state))
        try:
            self.loop.run(self.env.rubric.score_rollout(vf_state))
        except AssertionError as err:  # verifiers' own check: group reward functions need a group of rollouts
            raise ValueError(f"verifiers env {self.id!r} cannot score one rollout: {err}") from None
        reward = float(vf_state["reward"] or 0.0)
        public = {"vf_reward": reward, "metrics": dict(vf_state.get("metrics") or {}), "turns": state["turns"],
                  "stop_condition": vf_state.get("stop_condition")}
        detail = {"got": answer, "public": public}
        return self.verdict(reward >= self.success, reward, detail)
