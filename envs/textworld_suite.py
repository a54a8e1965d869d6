"""The ``textworld`` suite: text adventure games generated offline from seeds (package ``textworld``)
and played step by step through tools; scored by the game engine: passed when the game is won;
the reward is 1/0 on ``won`` (``reward=correct``, the default) or, with ``reward=partial``, 1.0 when
won else the normalised game score.

Games come from TextWorld's challenges ``tw-simple`` and ``tw-cooking``, built once with
``tw-make`` (a child process, ~4-10 s each) into ``<coevo cache>/textworld/`` and reused. Game ``i``
of a config uses the seed ``seed * 10000 + i``; its split is fixed by index ranges before it is
built (for ``tw-cooking`` the game is drawn from TextWorld's own matching split: ``train``,
``valid`` or ``test`` food items), and games whose content (first observation + walkthrough)
repeats an earlier game are dropped.

Tools per episode: ``act(command)``, ``look()``, ``inventory()`` over a fresh game; each counts as a
game move. With ``admissible=true`` the task prompt and every tool reply end with the game's
admissible commands (TextWorld's ``admissible_commands``: what the parser accepts in the current
state), the usual way a small policy is given a long-horizon text game it can play
(``textworld:challenge=tw-cooking,size=10,seed=0,admissible=true``). With ``admissible=numbered``
they are listed numbered, one a line ("1. go north"), and ``act`` also takes the number of one of
the CURRENT list (``3``, ``3.``, ``3)``, ``3:`` or ``option 3`` at the start of the command:
``coevo.envs.common.leading_choice``); a number outside the list is an invalid action (the game is
not stepped, the reply says so and repeats the list). The number form is for small policies that
cannot write a command or a JSON action (docs/benchmarks/evoharness.md, "An environment where H0 succeeds
sometimes"); base harness ``textworld_numbered`` reads a bare number as the ``act`` call.
With either listing, ``act`` also declares the commands it accepts now (``Tool.accepts``: ``command`` as an
``enum`` of the admissible commands), so a harness that decodes under a constraint (``decoding.constrain``,
base harness ``textworld_choice``) makes every reply one admissible command, chosen by the model's own
likelihoods over the commands' text.
Challenge ``tw-coin_collector`` (``level`` 1-300; TextWorld: a chain of ``(level - 1) % 100 + 1``
rooms with the coin in the last, distractor rooms from level 101) is the simplest long-horizon game.
Reference: ``textworld:challenge=tw-cooking,size=10,seed=0``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from coevo.envs.base import Episode, Score, Split, Task, Tool
from coevo.envs.common import EnvRefError, cache_dir, dedupe, leading_choice, require, split_sizes, task_id
from coevo.envs.suite import Suite

CHALLENGES: dict[str, dict[str, Any]] = {
    "tw-simple": {"rewards": "dense", "goal": "detailed"},
    "tw-cooking": {"recipe": 1, "take": 1, "go": 1, "open": True, "cook": False, "cut": False},
    "tw-coin_collector": {"level": 1},
}
ADMISSIBLE = {"false": "", "0": "", "no": "", "true": "list", "1": "list", "yes": "list", "numbered": "numbered"}
COOKING_SPLIT = {"train": "train", "val": "valid", "test": "test"}
_BANNER = re.compile(r"^[\s$\\|_/<>]*$")


def choices(commands: Any) -> list[str]:
    """TextWorld's admissible commands (``None`` for none) as a sorted list of strings: the order they are
    listed and numbered in, so option ``n`` is ``choices(commands)[n - 1]``."""
    return sorted(str(c) for c in commands or [])


def clean_feedback(text: str) -> str:
    """Game text without the ASCII-art banner, the command prompt and the status bar."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    kept = [ln for ln in lines if not (ln.strip() and _BANNER.match(ln)) and not ln.lstrip().startswith(">")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


def _tw_make() -> list[str]:
    script = Path(sys.executable).with_name("tw-make")
    found = str(script) if script.exists() else shutil.which("tw-make")
    if not found:
        raise RuntimeError("tw-make not found next to this Python; reinstall with pip install 'coevo[textworld]'")
    return [sys.executable, found]


class TextWorldEnv(Suite):
    """TextWorld games (see module doc).

    ``challenge``: ``tw-simple``, ``tw-cooking`` or ``tw-coin_collector``; ``size``: games generated;
    ``seed``: base seed; ``val_frac``/``test_frac``; other keyword arguments override the challenge's
    ``tw-make`` options (e.g. ``recipe=2``, ``go=6``, ``cook=true``, ``level=5``). ``cache``: where games
    are built (default ``<coevo cache>/textworld``); ``reward``: ``correct`` or ``partial`` (module doc). Raises
    ``ValueError`` for an unknown challenge, option or reward mode and ``MissingExtraError`` when
    textworld is not installed. ``admissible``: ``true`` lists the admissible commands in the prompt
    and after every reply, ``numbered`` numbers them and lets ``act`` take a number (module doc; the
    tasks' ids differ between the three modes). Raises ``ValueError`` for another ``admissible`` or a
    ``tw-coin_collector`` level outside 1-300.
    """

    name = "textworld"

    def __init__(self, challenge: str = "tw-simple", size: int = 10, seed: int = 0, val_frac: float = 0.2,
                 test_frac: float = 0.2, cache: str | None = None, reward: str = "correct", admissible: bool = False,
                 **options: Any) -> None:
        super().__init__(reward)
        require("textworld", "textworld", "textworld")
        if challenge not in CHALLENGES:
            raise EnvRefError(f"unknown textworld challenge {challenge!r}; choose from {sorted(CHALLENGES)}")
        if bad := [k for k in options if k not in CHALLENGES[challenge]]:
            raise EnvRefError(f"unknown {challenge} options {bad}; known: {sorted(CHALLENGES[challenge])}")
        if str(admissible).lower() not in ADMISSIBLE:
            raise EnvRefError(f"admissible={admissible!r}: use true, false or numbered")
        level = str(options.get("level", 1)).strip()
        if challenge == "tw-coin_collector" and not (level.isdecimal() and 1 <= int(level) <= 300):
            raise EnvRefError(f"level={level} must be in 1..300 (an integer: TextWorld's tw-coin_collector levels)")
        if int(size) < 1:
            raise EnvRefError(f"size={size} must be >= 1")
        self.challenge, self.size, self.seed = challenge, int(size), int(seed)
        self.listing = ADMISSIBLE[str(admissible).lower()]
        self.admissible = bool(self.listing)
        self.val_frac, self.test_frac = float(val_frac), float(test_frac)
        self.options = {**CHALLENGES[challenge], **options}
        self.cache = Path(cache) if cache else cache_dir("textworld")
        self.config = {"challenge": challenge, "size": self.size, "seed": self.seed, "val_frac": self.val_frac,
                       "test_frac": self.test_frac, "options": self.options, "reward": self.reward_mode,
                       **({"admissible": True if self.listing == "list" else self.listing} if self.admissible else {})}
        self._games: dict[str, dict[str, Any]] = {}

    # --- building -----------------------------------------------------------------------------

    def _args(self, game_seed: int, split: Split) -> list[str]:
        args = [self.challenge]
        for key, value in self.options.items():
            if isinstance(value, bool):
                args += [f"--{key}"] if value else []
            else:
                args += [f"--{key}", str(value)]
        if self.challenge == "tw-cooking":
            args += ["--split", COOKING_SPLIT[split]]
        return args + ["--seed", str(game_seed)]

    def game_path(self, game_seed: int, split: Split) -> Path:
        """The cached ``.z8`` of one game (built on first use; safe to call concurrently)."""
        args = self._args(game_seed, split)
        stem = f"{self.challenge}-{hashlib.sha256(' '.join(args).encode()).hexdigest()[:12]}-s{game_seed}"
        path = self.cache / f"{stem}.z8"
        if path.exists() and path.with_suffix(".meta.json").exists():
            return path
        tmp = Path(tempfile.mkdtemp(prefix="tw-build-", dir=self.cache))
        try:
            out = tmp / f"{stem}.z8"
            proc = subprocess.run(_tw_make() + args + ["--output", str(out), "-f", "--silent"],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0 or not out.exists():
                raise RuntimeError(f"tw-make failed for {args}: {proc.stderr[-2000:]}")
            meta = self._read_game(out)
            for suffix in (".json", ".z8"):
                os.replace(out.with_suffix(suffix), path.with_suffix(suffix))
            path.with_suffix(".meta.json").write_text(json.dumps(meta))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return path

    @staticmethod
    def _infos(walkthrough: bool = True, admissible: bool = False) -> Any:
        from textworld import EnvInfos

        return EnvInfos(max_score=True, won=True, lost=True, score=True, moves=True, objective=True,
                        admissible_commands=admissible, extras=["walkthrough"] if walkthrough else [])

    def commands_text(self, commands: Any) -> str:
        """The admissible commands as the model reads them (sorted; ``look`` and ``inventory`` kept):
        one comma-separated line, or with ``admissible=numbered`` one numbered command a line."""
        names = choices(commands)
        if self.listing == "numbered":
            return "Admissible commands (reply with the number of one):\n" + "\n".join(
                f"{i}. {c}" for i, c in enumerate(names, 1))
        return "Admissible commands: " + ", ".join(names)

    def _read_game(self, path: Path) -> dict[str, Any]:
        import textworld

        env = textworld.start(str(path), request_infos=self._infos())
        try:
            gs = env.reset()
            return {"intro": clean_feedback(gs.feedback), "walkthrough": list(gs["extra.walkthrough"] or []),
                    "max_score": gs.max_score, "objective": gs.objective}
        finally:
            env.close()

    def _build(self) -> dict[Split, list[Task]]:
        sizes = split_sizes(self.size, self.val_frac, self.test_frac)
        plan: list[Split] = [s for s in ("train", "val", "test") for _ in range(sizes[s])]  # type: ignore[misc]
        games = []
        for i, split in enumerate(plan):
            game_seed = self.seed * 10000 + i
            path = self.game_path(game_seed, split)
            meta = json.loads(path.with_suffix(".meta.json").read_text())
            games.append((split, game_seed, path, meta))
        games = dedupe(games, key=lambda g: g[3]["intro"] + "\n" + "\n".join(g[3]["walkthrough"]))
        out: dict[Split, list[Task]] = {"train": [], "val": [], "test": []}
        for split, game_seed, path, meta in games:
            kind, prompt = self.challenge, meta["intro"]
            if self.admissible:  # another prompt, so another task id
                kind = f"{kind}+admissible" + ("+numbered" if self.listing == "numbered" else "")
                prompt = f"{prompt}\n\n{self.commands_text(self._first_commands(path))}"
            tid = task_id(self.name, f"{kind}\n{meta['intro']}\n" + "\n".join(meta["walkthrough"]), self.config)
            out[split].append(Task(id=tid, env=self.name, split=split, prompt=prompt,
                                   metadata={"challenge": self.challenge, "game_seed": game_seed,
                                             "max_score": meta["max_score"]}))
            self._games[tid] = {"path": str(path), **meta}
            self._gold[tid] = meta["walkthrough"]
        return out

    def _first_commands(self, path: Path) -> list[str]:
        import textworld

        env = textworld.start(str(path), request_infos=self._infos(walkthrough=False, admissible=True))
        try:
            return list(env.reset().admissible_commands or [])
        finally:
            env.close()

    def reveal(self, task: Task) -> str:
        """The walkthrough (commands that win), joined by ``; ``."""
        return "; ".join(self._known(task))

    def walkthrough(self, task: Task) -> tuple[list[tuple[str, dict[str, Any]]], str]:
        """The winning commands as ``act`` tool calls and the closing answer ``done``: the
        demonstration the harness teacher plays on a train task (``coevo.training.evoharness.teacher``)."""
        return [("act", {"command": c}) for c in self._known(task)], "done"

    def constant_candidates(self, split: Split) -> list[str]:
        """None beyond the empty answer: the text answer does not matter, only the game state."""
        return []

    # --- episodes -----------------------------------------------------------------------------

    def episode(self, task: Task, seed: int = 0) -> Episode:
        """A fresh game (reset) with tools ``act``, ``look``, ``inventory``; ``state`` tracks score,
        won/lost, moves and the commands played (it survives ``close``)."""
        import textworld

        self._known(task)
        game = self._games[task.id]
        env = textworld.start(game["path"], request_infos=self._infos(walkthrough=False, admissible=self.admissible))
        gs = env.reset()
        state: dict[str, Any] = {"score": 0, "max_score": gs.max_score, "won": False, "lost": False, "moves": 0,
                                 "done": False, "commands": [], "closed": False, "invalid": 0,
                                 "choices": choices(gs.admissible_commands)}

        def step(command: str) -> str:
            if state["closed"]:
                raise RuntimeError("the episode is closed")
            if state["done"]:
                return "The game has ended; no more actions are possible."
            command = str(command).strip()
            if not command:
                raise ValueError("command is empty; e.g. act(command='go north')")
            if self.listing == "numbered" and (n := leading_choice(command)) is not None:
                if not 1 <= n <= len(state["choices"]):
                    state["invalid"] += 1
                    return (f"There is no command {n}: reply with a number from 1 to {len(state['choices'])}."
                            f"\n\n{self.commands_text(state['choices'])}")
                command = state["choices"][n - 1]
            new, _, done = env.step(command)
            state["commands"].append(command)
            state.update(score=new.score, won=bool(new.won), lost=bool(new.lost), moves=new.moves, done=bool(done),
                         choices=choices(new.admissible_commands))
            text = clean_feedback(new.feedback)
            if state["done"]:
                text += (f"\n\n[The game has ended: {'you won' if state['won'] else 'you lost'}; "
                         f"score {new.score}/{new.max_score}.]")
            elif self.admissible:
                text += "\n\n" + self.commands_text(new.admissible_commands)
            return text

        def close() -> None:
            state["closed"] = True
            env.close()

        no_args = {"type": "object", "properties": {}, "required": []}
        act_args = {"type": "object", "properties": {"command": {"type": "string", "description": "the command"}},
                    "required": ["command"]}

        def admissible_now() -> dict[str, Any]:  # act's arguments under a constraint: one admissible command
            if not state["choices"]:
                return act_args
            command = {**act_args["properties"]["command"], "enum": list(state["choices"])}
            return {**act_args, "properties": {"command": command}}

        tools = [
            Tool("act", "Type a command into the game (e.g. 'go north', 'open door', 'take key from chest') and "
                        "read the game's reply." + (" A number plays that command of the numbered list."
                                                    if self.listing == "numbered" else ""),
                 act_args, step, blocking=True, accepts=admissible_now if self.admissible else None),
            Tool("look", "Describe the current room.", no_args, lambda: step("look"), blocking=True),
            Tool("inventory", "List what you are carrying.", no_args, lambda: step("inventory"), blocking=True),
        ]
        return Episode(task=task, tools=tools, state=state, closer=close)

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """Passed when the game is won; credit 1.0 when won, else score / max_score (0 when max_score
        is 0); the reward per ``reward_mode``. The text ``answer`` plays no part."""
        self._known(task)
        st = episode.state
        max_score = st.get("max_score") or 0
        credit = 1.0 if st.get("won") else (st.get("score", 0) / max_score if max_score else 0.0)
        public = {"won": bool(st.get("won")), "lost": bool(st.get("lost")), "score": st.get("score", 0),
                  "max_score": max_score, "moves": st.get("moves", 0)}
        detail = {"expected": self._gold[task.id], "got": list(st.get("commands", [])), "public": public}
        return self.verdict(credit, bool(st.get("won")), detail)
