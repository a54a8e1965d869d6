"""Known-answer probes: for every suite coevo ships, a correct, a wrong and an edge answer per
family / category, scored through coevo's env by the installed checker, with the verdict each must
get. A checker that changes upstream (partial credit, normalisation, decoder, error types) fails
here before it becomes reward.

The probes were verified against ``SCORER_VERSIONS``; after an upgrade, re-run this module, check
every changed verdict against the package's changelog, then update the table and the versions.

- reasoning-gym: item 0 of each family at seed 0 (``reasoning_gym.create_dataset(f, size=1,
  seed=0)[0]``), for the families coevo's configs, defaults, docs and tests use; each probe gives
  the checker's credit and pass, and the reward in both reward modes follows from them.
- BFCL AST: entry ``<category>_0`` of each AST category: passed or not and BFCL's error type.
- BFCL multi_turn: entry ``<category>_0`` of each multi-turn category, played through the real
  stateful tools from its ground-truth calls (``plan`` says how the play departs from them).
- TextWorld: the train game of ``tw-simple`` (size 3, seed 0): won, game score and credit.
"""

from __future__ import annotations

from importlib.metadata import version

import pytest

from coevo.envs.base import SPLITS
from coevo.envs.interaction import next_user_turn
from coevo.envs.registry import get_env

SCORER_VERSIONS = {"bfcl-eval": "2026.3.23", "reasoning-gym": "0.1.25", "textworld": "1.7.0"}

WS_GOLD = "Hart, find, inform, necessarily, profit, received, subscribers, tax, undertaking"
# family -> (gold of item 0, [(kind, answer, credit, passed)])
RG_PROBES = {
    "word_sorting": (WS_GOLD, [
        ("correct", WS_GOLD, 1.0, True),
        ("wrong", "foo, bar", 0.0, False),
        ("edge: no spaces after commas", WS_GOLD.replace(", ", ","), 1.0, True),
        ("edge: reversed (same words)", ", ".join(reversed(WS_GOLD.split(", "))), 0.2, False),
        ("edge: a second marker left in the span", WS_GOLD + "\nFinal answer: foo, bar", 8 / 9, False),
    ]),
    "chain_sum": ("-14282", [
        ("correct", "-14282", 1.0, True),
        ("wrong: sign", "14282", 0.0, False),
        ("edge: thousands comma", "-14,282", 1.0, True),
        ("edge: trailing decimals", "-14282.00", 1.0, True),
        ("edge: a digit too many (substring credit)", "-142820", 6 / 7, False),
    ]),
    "basic_arithmetic": ("106475279601", [
        ("correct", "106475279601", 1.0, True),
        ("wrong", "0", 0.0, False),
        ("edge: trailing .0 (substring credit)", "106475279601.0", 12 / 14, False),
        ("edge: thousands commas", "106,475,279,601", 0.0, False),
    ]),
    "coin_flip": ("1", [
        ("correct", "1", 1.0, True),
        ("wrong", "0.5", 0.0, False),
        ("edge: fraction", "512/512", 1.0, True),
        ("edge: within tolerance 1e-4", "1.00001", 1.0, True),
    ]),
    "letter_counting": ("1", [
        ("correct", "1", 1.0, True),
        ("wrong", "2", 0.0, False),
        ("edge: gold inside (substring credit)", "11", 0.5, False),
        ("edge: a word", "one", 0.0, False),
    ]),
    "gcd": ("3", [
        ("correct", "3", 1.0, True),
        ("wrong", "1", 0.0, False),
        ("edge: 3.0 (substring credit)", "3.0", 1 / 3, False),
    ]),
}

# bfcl id -> [(kind, answer, passed, error type)]
AST_PROBES = {
    "simple_python_0": [
        ("correct: optional unit left out", "[calculate_triangle_area(base=10, height=5)]", True, None),
        ("wrong: values swapped", "[calculate_triangle_area(base=5, height=10)]", False, "value_error:others"),
        ("edge: ```python fence", "```python\n[calculate_triangle_area(base=10, height=5)]\n```", False,
         "ast_decoder:decoder_failed"),
        ("edge: bare ``` fence", "```\n[calculate_triangle_area(base=10, height=5)]\n```", True, None),
        ("edge: float for an integer", "[calculate_triangle_area(base=10.0, height=5)]", False, "type_error:simple"),
        ("edge: positional arguments", "[calculate_triangle_area(10, 5)]", False,
         "simple_function_checker:missing_required"),
    ],
    "multiple_0": [
        ("correct", "[triangle_properties.get(side1=5, side2=4, side3=3)]", True, None),
        ("wrong: function name", "[triangle_properties(side1=5, side2=4, side3=3)]", False,
         "simple_function_checker:wrong_func_name"),
        ("edge: no brackets", "triangle_properties.get(side1=5, side2=4, side3=3, get_area=True)", True, None),
    ],
    "parallel_0": [
        ("correct", "[spotify.play(artist='Taylor Swift', duration=20), spotify.play(artist='Maroon 5', duration=15)]",
         True, None),
        ("wrong: one call missing", "[spotify.play(artist='Taylor Swift', duration=20)]", False,
         "parallel_function_checker_no_order:wrong_count"),
        ("edge: other order",
         "[spotify.play(artist='Maroon 5', duration=15), spotify.play(artist='Taylor Swift', duration=20)]",
         True, None),
    ],
    "parallel_multiple_0": [
        ("correct", "[math_toolkit.sum_of_multiples(lower_limit=1, upper_limit=1000, multiples=[3, 5]), "
                    "math_toolkit.product_of_primes(count=5)]", True, None),
        ("wrong: a list value", "[math_toolkit.sum_of_multiples(lower_limit=1, upper_limit=1000, multiples=[3]), "
                                "math_toolkit.product_of_primes(count=5)]", False,
         "parallel_function_checker_no_order:cannot_find_match"),
        ("edge: other order", "[math_toolkit.product_of_primes(count=5), "
                              "math_toolkit.sum_of_multiples(lower_limit=1, upper_limit=1000, multiples=[3, 5])]",
         True, None),
    ],
    "live_simple_0-0-0": [
        ("correct", "[get_user_info(user_id=7890, special='black')]", True, None),
        ("wrong: string for an integer", "[get_user_info(user_id='7890', special='black')]", False,
         "type_error:simple"),
        ("edge: an optional the answer needs", "[get_user_info(user_id=7890)]", False,
         "simple_function_checker:missing_optional"),
    ],
    "live_multiple_0-0-0": [
        ("correct", "[ChaDri.change_drink(drink_id='latte', new_preferences={'size': 'large', 'milk_type': 'coconut', "
                    "'sweetness_level': 'extra', 'temperature': 'hot', 'special_instructions': 'served boiling hot'})]",
         True, None),
        ("wrong: value", "[ChaDri.change_drink(drink_id='mocha', new_preferences={'size': 'large', 'milk_type': "
                         "'coconut', 'sweetness_level': 'extra', 'temperature': 'hot', 'special_instructions': "
                         "'served boiling hot'})]", False, "value_error:string"),
        ("edge: another accepted string", "[ChaDri.change_drink(drink_id='latte', new_preferences={'size': 'large', "
                                          "'milk_type': 'coconut', 'sweetness_level': 'extra', 'temperature': 'hot', "
                                          "'special_instructions': 'boiling hot'})]", True, None),
    ],
    "live_parallel_0-0-0": [
        ("correct", "[get_current_weather(location='Beijing, China', unit='fahrenheit'), "
                    "get_current_weather(location='Shanghai, China', unit='fahrenheit')]", True, None),
        ("wrong: one call missing", "[get_current_weather(location='Beijing, China')]", False,
         "parallel_function_checker_no_order:wrong_count"),
        ("edge: optional unit left out, other order", "[get_current_weather(location='Shanghai, China'), "
                                                      "get_current_weather(location='Beijing, China')]", True, None),
    ],
    "live_parallel_multiple_0-0-0": [
        ("correct", "[ChaFod(foodItem='Caesar salad', removeIngredients='anchovies'), ChaDri.change_drink("
                    "drink_id='123', new_preferences={'size': 'large', 'temperature': 'hot', 'sweetness_level': "
                    "'regular', 'milk_type': 'almond'})]", True, None),
        ("wrong: one call missing", "[ChaFod(foodItem='Caesar salad', removeIngredients='anchovies')]", False,
         "parallel_function_checker_no_order:wrong_count"),
        ("edge: alternative value, optional left out", "[ChaFod(foodItem='Caesar salad', removeIngredients='anchovy'), "
                                                       "ChaDri.change_drink(drink_id='123', new_preferences={'size': "
                                                       "'large', 'temperature': 'hot', 'milk_type': 'almond'})]",
         True, None),
    ],
}


def _extra_pwd_last(turns):
    return turns[:-1] + [turns[-1] + [("pwd", {})]]


def _pwd_in_empty_turn(turns):
    k = next(i for i, t in enumerate(turns) if not t)
    return turns[:k] + [[("pwd", {})]] + turns[k + 1:]


def _next_turn_early(turns):
    k = next(i for i, t in enumerate(turns) if not t)
    return turns[:k] + [turns[k + 1], []] + turns[k + 2:]


PLANS = {"gold": lambda turns: turns, "first turn only": lambda turns: turns[:1],
         "extra pwd() in the last turn": _extra_pwd_last, "pwd() in the turn with nothing to call": _pwd_in_empty_turn,
         "next turn's calls one turn early": _next_turn_early}
# bfcl id -> [(plan, passed, error type)]
MULTI_TURN_PROBES = {
    "multi_turn_base_0": [("gold", True, None), ("first turn only", False, "multi_turn:empty_turn_model_response"),
                          ("extra pwd() in the last turn", True, None)],
    "multi_turn_miss_func_0": [("gold", True, None), ("first turn only", False, "multi_turn:empty_turn_model_response"),
                               ("pwd() in the turn with nothing to call", True, None)],
    "multi_turn_miss_param_0": [("gold", True, None),
                                ("first turn only", False, "multi_turn:empty_turn_model_response"),
                                ("next turn's calls one turn early", False, "multi_turn:empty_turn_model_response")],
    "multi_turn_long_context_0": [("gold", True, None),
                                  ("first turn only", False, "multi_turn:empty_turn_model_response"),
                                  ("extra pwd() in the last turn", True, None)],
}

# plan -> (won, game score, credit); the tw-simple train game has max_score 7
TEXTWORLD_PROBES = {
    "walkthrough": (True, 7, 1.0),
    "nothing played": (False, 0, 0.0),
    "first command only": (False, 1, 1 / 7),
    "walkthrough, then more commands": (True, 7, 1.0),
}


def test_probes_describe_the_installed_scorer_versions():
    installed = {}
    for name in SCORER_VERSIONS:
        try:
            installed[name] = version(name)
        except Exception:
            installed[name] = None
    changed = {n: (v, installed[n]) for n, v in SCORER_VERSIONS.items() if installed[n] not in (None, v)}
    assert not changed, (f"scorer versions changed (probed, installed): {changed}; re-run this module, check each "
                         f"changed verdict against the changelog, then update the probes and SCORER_VERSIONS")


# --- reasoning-gym --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rg_envs():
    ref = "reasoning_gym:families=" + "+".join(RG_PROBES) + ",size=1"
    envs = {mode: get_env(f"{ref},reward={mode}") for mode in ("correct", "partial")}
    for env in envs.values():
        env.tasks("train")
    return envs


@pytest.mark.parametrize("family, kind, answer, credit, passed",
                         [(f, *p) for f, (_, probes) in RG_PROBES.items() for p in probes],
                         ids=[f"{f}: {p[0]}" for f, (_, probes) in RG_PROBES.items() for p in probes])
def test_reasoning_gym_probe(rg_envs, family, kind, answer, credit, passed):
    import reasoning_gym

    entry = reasoning_gym.create_dataset(family, size=1, seed=0)[0]
    assert entry["answer"] == RG_PROBES[family][0], "the generator changed: item 0 is another question"
    strict = rg_envs["correct"].score_entry(family, entry, answer)
    assert strict.passed is passed and strict.detail["public"]["credit"] == pytest.approx(credit)
    assert strict.reward == (1.0 if passed else 0.0)
    assert rg_envs["partial"].score_entry(family, entry, answer).reward == pytest.approx(credit)


# --- BFCL -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bfcl():
    pytest.importorskip("bfcl_eval")
    env = get_env("bfcl:categories=ast+multi_turn")
    return env, {t.metadata["bfcl_id"]: t for s in SPLITS for t in env.tasks(s)}


@pytest.mark.parametrize("bfcl_id, kind, answer, passed, error_type",
                         [(i, *p) for i, probes in AST_PROBES.items() for p in probes],
                         ids=[f"{i}: {p[0]}" for i, probes in AST_PROBES.items() for p in probes])
def test_bfcl_ast_probe(bfcl, bfcl_id, kind, answer, passed, error_type):
    env, tasks = bfcl
    task = tasks[bfcl_id]
    score = env.score(task, answer, env.episode(task))
    assert (score.passed, score.detail["public"]["error_type"], score.reward) == (passed, error_type, float(passed))


@pytest.mark.parametrize("bfcl_id, plan, passed, error_type",
                         [(i, *p) for i, probes in MULTI_TURN_PROBES.items() for p in probes],
                         ids=[f"{i}: {p[0]}" for i, probes in MULTI_TURN_PROBES.items() for p in probes])
def test_bfcl_multi_turn_probe(bfcl, bfcl_id, plan, passed, error_type):
    env, tasks = bfcl
    task = tasks[bfcl_id]
    turns = PLANS[plan]([list(t) for t in env.gold_actions(task)])
    episode = env.episode(task)
    for i, turn in enumerate(turns):
        if i:
            next_user_turn(episode, "done")
        tools = {t.name: t for t in episode.tools}
        for name, kwargs in turn:
            tools[name].fn(**kwargs)
    while next_user_turn(episode, "done") is not None:
        pass
    episode.close()
    score = env.score(task, "done", episode)
    assert (score.passed, score.detail["public"]["error_type"], score.reward) == (passed, error_type, float(passed))


# --- TextWorld ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def textworld():
    pytest.importorskip("textworld")
    ref = "textworld:challenge=tw-simple,size=3,seed=0"
    return get_env(ref), get_env(ref + ",reward=partial")


@pytest.mark.parametrize("plan", list(TEXTWORLD_PROBES))
def test_textworld_probe(textworld, plan):
    correct, partial = textworld
    task = correct.tasks("train", 1)[0]
    walkthrough = list(correct._gold[task.id])
    commands = {"walkthrough": walkthrough, "nothing played": [], "first command only": walkthrough[:1],
                "walkthrough, then more commands": walkthrough + ["look", "go north"]}[plan]
    episode = correct.episode(task)
    act = {t.name: t for t in episode.tools}["act"]
    for command in commands:
        act.fn(command=command)
    episode.close()
    won, game_score, credit = TEXTWORLD_PROBES[plan]
    score = correct.score(task, "I won", episode)
    assert (score.passed, score.detail["public"]["won"], score.detail["public"]["score"]) == (won, won, game_score)
    assert score.detail["public"]["max_score"] == 7 and score.detail["public"]["credit"] == pytest.approx(credit)
    assert score.reward == float(won)
    assert partial.score(partial.tasks("train", 1)[0], "I won", episode).reward == pytest.approx(credit)
