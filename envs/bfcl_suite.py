"""The ``bfcl`` suite: the Berkeley Function-Calling Leaderboard (package ``bfcl-eval``, data ships
inside it), scored by BFCL's own checkers.

- AST categories (``simple_python``, ``multiple``, ``parallel``, ``parallel_multiple``,
  ``live_simple``, ``live_multiple``, ``live_parallel``, ``live_parallel_multiple``): the prompt is
  the question plus the function docs (JSON); the answer is a python-call list such as
  ``[get_weather(city='Paris')]``, decoded by BFCL's prompting decoder and checked by
  ``ast_checker`` against the possible answers. No tools.
- multi_turn categories (``multi_turn_base``, ``multi_turn_miss_func``, ``multi_turn_miss_param``,
  ``multi_turn_long_context``): the episode's tools are the real stateful API classes (file
  system, trading bot, ...) executed by BFCL's executor during the episode; the conversation goes
  on turn by turn through ``coevo.envs.interaction`` (miss_func reveals its held-out function at
  its turn by extending ``episode.tools``); ``multi_turn_checker`` re-executes the recorded calls on
  fresh instances and compares end state and responses with the ground truth, turn by turn.

BFCL's executor keeps API instances in its module globals under ``<model>_<entry id>_<class>``:
each episode uses a unique key as the model name, and closing the episode (and every scoring)
deletes that key's globals.

Splits: per category, entries deduplicated by content (question + functions / initial state), put
in a seeded order (``seed``) and optionally cut to ``size``; each entry's split is a seeded hash of
its first user message (``common.hash_split``), so the multi-turn variants of one scenario (base,
miss_func, miss_param, long_context share it) and repeated questions always land in the same split.
Reference: ``bfcl:categories=simple_python+multiple,seed=0,size=100``; groups ``ast`` and
``multi_turn`` expand to their categories.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import random
import uuid
from typing import Any

from coevo.envs.base import Episode, Score, Split, Task, Tool
from coevo.envs.bfcl_import import load_bfcl
from coevo.envs.common import EnvRefError, as_list, dedupe, hash_split, round_robin, task_id
from coevo.envs.interaction import NEXT_USER_TURN
from coevo.envs.suite import Suite

AST_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
                  "live_parallel", "live_parallel_multiple")
MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
GROUPS = {"ast": AST_CATEGORIES, "multi_turn": MULTI_TURN_CATEGORIES, "simple": ("simple_python",)}
CHECKER_MODEL = "coevo"


def _render_question(turn: list[dict[str, Any]]) -> str:
    return "\n\n".join(m["content"] if m["role"] == "user" else f"[{m['role']}] {m['content']}" for m in turn)


def _json_schema(node: Any, type_map: dict[str, str]) -> Any:
    """A BFCL (Gorilla) parameter schema as JSON Schema: types mapped (``dict`` -> ``object``,
    ``float`` -> ``number``, ``tuple`` -> ``array``, ``any`` -> ``string``), recursively."""
    if isinstance(node, list):
        return [_json_schema(x, type_map) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            out[key] = type_map.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: _json_schema(v, type_map) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf"):
            out[key] = _json_schema(value, type_map)
        else:
            out[key] = value
    return out


_MISSING = object()


def _pick(options: list[Any]) -> Any:
    """The first non-empty alternative of a BFCL possible-answer list (``""`` = may be omitted)."""
    for option in options:
        if option != "":
            return _realise(option)
    return _MISSING


def _realise(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, options in value.items():
            chosen = _pick(options) if isinstance(options, list) else options
            if chosen is not _MISSING:
                out[key] = chosen
        return out
    if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        return [_realise(x) for x in value]
    return value


def gold_call_list(ground_truth: list[dict[str, Any]]) -> str:
    """One correct python-call list for an AST entry's possible answers (first alternative of each
    parameter; optional ones omitted), e.g. ``[f(a=1, b='x')]``."""
    calls = []
    for call in ground_truth:
        for name, params in call.items():
            args = _realise(params)
            calls.append(f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")")
    return "[" + ", ".join(calls) + "]"


class BfclEnv(Suite):
    """BFCL tasks (see module doc).

    ``categories``: category names or groups (``ast``, ``multi_turn``); default ``simple_python``.
    ``seed``: order of entries before the split cut; ``size``: entries kept per category (all when
    ``None``); ``val_frac``/``test_frac``: split fractions; ``reward``: ``correct`` or ``partial``
    (the same here: BFCL's checkers pass or fail). Raises ``ValueError`` for an unknown or
    unsupported category or reward mode and ``MissingExtraError`` when bfcl-eval is not installed.
    """

    name = "bfcl"

    def __init__(self, categories: Any = ("simple_python",), seed: int = 0, size: int | None = None,
                 val_frac: float = 0.2, test_frac: float = 0.2, reward: str = "correct") -> None:
        super().__init__(reward)
        self.bfcl = load_bfcl()
        cats: list[str] = []
        for c in as_list(categories):
            cats += list(GROUPS.get(c, (c,)))
        supported = AST_CATEGORIES + MULTI_TURN_CATEGORIES
        if not cats or (bad := [c for c in cats if c not in supported]):
            raise EnvRefError(f"unsupported bfcl categories {cats if not cats else bad}; choose from {list(supported)} "
                              f"or the groups {sorted(GROUPS)}")
        self.categories = list(dict.fromkeys(cats))
        self.seed, self.size = int(seed), (None if size is None else int(size))
        self.val_frac, self.test_frac = float(val_frac), float(test_frac)
        self.config = {"categories": self.categories, "seed": self.seed, "size": self.size,
                       "val_frac": self.val_frac, "test_frac": self.test_frac, "reward": self.reward_mode}
        self._entries: dict[str, tuple[str, dict[str, Any], list[Any]]] = {}

    # --- tasks ------------------------------------------------------------------------------

    def _build(self) -> dict[Split, list[Task]]:
        per_split: dict[Split, list[list[Task]]] = {"train": [], "val": [], "test": []}
        for cat in self.categories:
            prompts = self.bfcl.load_dataset_entry(cat)
            answers = {g["id"]: g["ground_truth"] for g in self.bfcl.load_ground_truth_entry(cat)}
            multi = cat in MULTI_TURN_CATEGORIES

            def content(e: dict[str, Any]) -> str:
                body = ({"q": e["question"], "init": e.get("initial_config")} if multi
                        else {"q": e["question"], "f": e["function"]})
                return json.dumps(body, sort_keys=True)

            entries = dedupe([e for e in prompts if e["id"] in answers], key=content)
            random.Random(self.seed).shuffle(entries)
            if self.size is not None:
                entries = entries[:self.size]
            chunks: dict[Split, list[Task]] = {"train": [], "val": [], "test": []}
            for e in entries:
                first = _render_question(e["question"][0])
                split = hash_split(first, self.seed, self.val_frac, self.test_frac)
                tid = task_id(self.name, f"{cat}\n{content(e)}", self.config)
                if multi:
                    prompt = first
                    meta = {"category": cat, "bfcl_id": e["id"], "turns": len(e["question"]),
                            "involved_classes": list(e["involved_classes"])}
                else:
                    prompt = first + "\n\nAvailable functions (JSON):\n" + json.dumps(e["function"], indent=1)
                    meta = {"category": cat, "bfcl_id": e["id"], "functions": [f["name"] for f in e["function"]]}
                chunks[split].append(Task(id=tid, env=self.name, split=split, prompt=prompt, metadata=meta))
                self._entries[tid] = (cat, e, answers[e["id"]])
                self._gold[tid] = answers[e["id"]]
            for split, tasks in chunks.items():
                per_split[split].append(tasks)
        return {s: round_robin(groups) for s, groups in per_split.items()}

    def reveal(self, task: Task) -> str:
        """A correct answer as text: the call list (AST) or the ground-truth calls per turn (multi-turn)."""
        gold = self._known(task)
        cat = self._entries[task.id][0]
        if cat in MULTI_TURN_CATEGORIES:
            return " | ".join("[" + ", ".join(turn) + "]" for turn in gold)
        return gold_call_list(gold)

    def constant_candidates(self, split: Split) -> list[str]:
        """Constant replies: the empty call list and a few non-calls."""
        return ["[]", "None", "I cannot help with that."]

    # --- episodes ---------------------------------------------------------------------------

    def episode(self, task: Task, seed: int = 0) -> Episode:
        """AST: an episode without tools. multi_turn: the entry's API functions as tools over fresh
        stateful instances, and ``state[NEXT_USER_TURN]`` to advance the conversation."""
        self._known(task)
        cat, entry, _ = self._entries[task.id]
        if cat not in MULTI_TURN_CATEGORIES:
            return Episode(task=task)
        key = f"coevo{uuid.uuid4().hex}"
        n_turns = len(entry["question"])
        state: dict[str, Any] = {"bfcl_key": key, "turn": 0, "calls": [[] for _ in range(n_turns)], "closed": False}
        def close() -> None:
            state["closed"] = True
            self._cleanup(key)

        episode = Episode(task=task, state=state, closer=close)
        episode.tools = [self._api_tool(doc, entry, cat, state) for doc in entry["function"]]
        missed = entry.get("missed_function") or {}

        def next_turn(reply: str | None) -> str | None:
            if state["turn"] + 1 >= n_turns:
                return None
            state["turn"] += 1
            held = missed.get(str(state["turn"]))
            if held:
                episode.tools.extend(self._api_tool(doc, entry, cat, state) for doc in held)
            question = entry["question"][state["turn"]]
            if question:
                return _render_question(question)
            return self.bfcl.additional_function_prompt

        state[NEXT_USER_TURN] = next_turn
        return episode

    def _api_tool(self, doc: dict[str, Any], entry: dict[str, Any], cat: str, state: dict[str, Any]) -> Tool:
        name = doc["name"]
        params = _json_schema(doc.get("parameters") or {"type": "object", "properties": {}}, self.bfcl.type_map)
        params["type"] = "object"

        def call(**kwargs: Any) -> str:
            if state["closed"]:
                raise RuntimeError("the episode is closed")
            text = f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")"
            state["calls"][state["turn"]].append([text])
            results, _ = self.bfcl.execute([text], entry["initial_config"], entry["involved_classes"],
                                           state["bfcl_key"], entry["id"], long_context="long_context" in cat)
            return results[0]

        return Tool(name=name, description=doc.get("description", ""), parameters=params, fn=call)

    def _cleanup(self, key: str) -> None:
        module = self.bfcl.executor_module
        for attr in [a for a in list(vars(module)) if a.startswith(key)]:  # list(): other threads insert
            delattr(module, attr)

    # --- scoring ----------------------------------------------------------------------------

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """BFCL's own verdict. AST: ``answer`` exactly as the harness submitted it goes through the
        steps of bfcl-eval's ``_evaluate_single_ast_entry`` for a prompting model: the default
        prompting decoder (which strips backticks, newlines and spaces at the ends and adds missing
        brackets, so a bare ``` fence passes but a ```python one does not), the function-call format
        check, then ``ast_checker``; coevo normalises nothing (a harness that wants fences removed
        says so in its parser, ``strip_code_fences``). multi_turn: ``multi_turn_checker`` on the
        calls the episode recorded (turns never reached count as empty). Reward 1 or 0 in both
        reward modes (BFCL gives no partial credit)."""
        self._known(task)
        cat, entry, gold = self._entries[task.id]
        if cat in MULTI_TURN_CATEGORIES:
            return self._score_multi_turn(task, cat, entry, gold, episode)
        public: dict[str, Any] = {"category": cat, "error_type": None}
        detail: dict[str, Any] = {"expected": gold_call_list(gold), "got": answer, "public": public}
        try:
            decoded = self.bfcl.decode_ast(answer or "", language=self.bfcl.ReturnFormat.PYTHON)
        except Exception as err:
            public["error_type"] = "ast_decoder:decoder_failed"
            detail["error"] = f"Invalid syntax. Failed to decode AST. {err}"
            return self.verdict(0.0, False, detail)
        if not self.bfcl.is_function_calling_format_output(decoded):
            public["error_type"] = "ast_decoder:decoder_wrong_output_format"
            detail["error"] = "Did not output in the specified format."
            return self.verdict(0.0, False, detail)
        try:
            result = self.bfcl.ast_checker(copy.deepcopy(entry["function"]), decoded, copy.deepcopy(gold),
                                           self.bfcl.Language.PYTHON, cat, CHECKER_MODEL)
        except Exception as err:  # a checker crash on odd input scores 0, with the reason
            public["error_type"] = f"checker_exception:{type(err).__name__}"
            detail["error"] = f"{type(err).__name__}: {err}"
            return self.verdict(0.0, False, detail)
        if result["valid"]:
            return self.verdict(1.0, True, detail)
        public["error_type"] = result.get("error_type")
        detail["error"] = "; ".join(map(str, result.get("error", [])))
        return self.verdict(0.0, False, detail)

    def suite_score(self, task: Task, reply: str) -> Score | None:
        """bfcl-eval's verdict on the raw ``reply`` (AST categories; None for multi_turn, which needs
        the episode's recorded calls): ``score`` of the reply as the model wrote it, so a
        ```json-fenced call list that a fence-stripping harness passes scores 0 here, as in bfcl-eval."""
        if self._entries[task.id][0] in MULTI_TURN_CATEGORIES:
            return None
        return self.score(task, reply, Episode(task=task, tools=[]))

    def _score_multi_turn(self, task: Task, cat: str, entry: dict[str, Any], gold: list[list[str]],
                          episode: Episode) -> Score:
        calls = episode.state.get("calls") or [[] for _ in gold]
        calls = [list(t) for t in calls] + [[] for _ in range(len(gold) - len(calls))]
        key = f"coevo{uuid.uuid4().hex}"
        public: dict[str, Any] = {"category": cat, "error_type": None, "turns": len(gold),
                                  "turns_reached": episode.state.get("turn", 0) + 1,
                                  "calls": sum(len(t) for t in calls)}
        detail: dict[str, Any] = {"expected": gold, "got": [[c for step in t for c in step] for t in calls],
                                  "public": public}
        try:
            result = self.bfcl.multi_turn_checker(calls, gold, copy.deepcopy(entry), cat, key)
        except Exception as err:
            result = {"valid": False, "error_type": f"checker_exception:{type(err).__name__}",
                      "error_message": str(err)}
        finally:
            self._cleanup(key)
        if result["valid"]:
            return self.verdict(1.0, True, detail)
        public["error_type"] = result.get("error_type")
        detail["error"] = str(result.get("error_message", ""))[:2000]
        return self.verdict(0.0, False, detail)

    # --- scripted solutions -------------------------------------------------------------------

    def gold_actions(self, task: Task) -> list[list[tuple[str, dict[str, Any]]]]:
        """The ground-truth calls of a multi-turn task as ``(tool name, keyword args)`` per turn
        (positional arguments bound to parameter names), for scripted solutions and tests."""
        cat, entry, gold = self._entries[task.id] if task.id in self._entries else (None, None, None)
        if cat not in MULTI_TURN_CATEGORIES:
            raise ValueError(f"task {task.id} is not a multi-turn task")
        classes = [getattr(importlib.import_module(self.bfcl.class_modules[c]), c) for c in entry["involved_classes"]]
        turns = []
        for turn in gold:
            actions = []
            for text in turn:
                node = ast.parse(text, mode="eval").body
                assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                name = node.func.id
                method = next(getattr(c, name) for c in classes if hasattr(c, name))
                args = [ast.literal_eval(a) for a in node.args]
                kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
                bound = inspect.signature(method).bind(None, *args, **kwargs)
                actions.append((name, {k: v for k, v in bound.arguments.items() if k != "self"}))
            turns.append(actions)
        return turns
