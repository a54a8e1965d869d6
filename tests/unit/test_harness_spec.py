"""HarnessSpec: ids, loading, validation errors, the condition registry, render and diff."""

from __future__ import annotations

import json

import pytest
from harness_kit import TABLE7, call, run, toy_tools

from coevo.harnesses import HarnessError, HarnessSpec, diff, load_harness, register_condition, render, validate_spec
from coevo.harnesses.registry import CONDITIONS
from coevo.harnesses.view import skill_applies


def problems(err: pytest.ExceptionInfo[HarnessError]) -> dict[str, str]:
    return {p.path: p.message for p in err.value.problems}


# --- ids ------------------------------------------------------------------------------------


def test_budget_defaults_follow_harness_s_table_8():
    b = HarnessSpec().budget
    assert (b.max_model_calls, b.max_env_actions, b.max_context_tokens, b.max_output_tokens) == (32, 30, 65_532, 8_192)


def test_same_spec_always_gets_the_same_id():
    a, b = load_harness(TABLE7), load_harness(json.loads(json.dumps(TABLE7)))
    assert a.id == b.id and len(a.id) == 64 and int(a.id, 16) >= 0
    assert a.short_id == a.id[:12]


def test_id_ignores_key_order_and_parents():
    reordered = {"prompt": TABLE7["prompt"], "hooks": dict(reversed(list(TABLE7["hooks"].items())))}
    with_parents = {**TABLE7, "parents": ["abc"]}
    assert load_harness(reordered).id == load_harness(TABLE7).id == load_harness(with_parents).id


def test_id_changes_with_content():
    a = load_harness(TABLE7)
    b = load_harness({**TABLE7, "budget": {"max_model_calls": 31}})
    assert a.id != b.id


# --- loading --------------------------------------------------------------------------------


def test_load_harness_reads_a_file_a_json_string_and_a_spec(tmp_path):
    path = tmp_path / "h.json"
    path.write_text(json.dumps(TABLE7))
    spec = load_harness(str(path))
    assert spec.id == load_harness(path).id == load_harness(json.dumps(TABLE7)).id == load_harness(spec).id
    assert spec.hooks["low-budget-completion"].parameters == {"threshold": 3}


def test_a_file_that_is_not_json_gives_one_readable_error(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"name": "x",\n  "budget": }')
    with pytest.raises(HarnessError) as err:
        load_harness(path)
    assert len(err.value.problems) == 1
    assert "not JSON" in err.value.problems[0].message and "line 2" in err.value.problems[0].message
    assert str(path) in str(err.value) and "1 problem" in str(err.value)


def test_a_missing_file_gives_one_readable_error(tmp_path):
    with pytest.raises(HarnessError) as err:
        load_harness(tmp_path / "nope.json")
    assert len(err.value.problems) == 1 and "no file" in str(err.value)


def test_json_that_is_not_an_object_is_rejected():
    with pytest.raises(HarnessError) as err:
        validate_spec([1, 2])  # type: ignore[arg-type]
    assert "JSON object" in err.value.problems[0].message


# --- validation -----------------------------------------------------------------------------


def hook(**kw):
    return {"hooks": {"h": {"event": "after_tool", "condition": "always", "action": "warn", **kw}}}


@pytest.mark.parametrize("data, path, words", [
    ({"budget": {"max_model_calls": -1}}, "/budget/max_model_calls", "greater than or equal to 1"),
    ({"budget": {"max_steps": 3}}, "/budget/max_steps", "Extra inputs"),
    ({"prompt": {"task_framing": "no placeholder"}}, "/prompt", "{task}"),
    (hook(condition="moon_is_full"), "/hooks/h/condition", "unknown hook condition 'moon_is_full'"),
    (hook(action="explode"), "/hooks/h/action", "unknown hook action 'explode'"),
    (hook(condition="remaining_steps_lte"), "/hooks/h/condition", "needs parameter 'threshold'"),
    (hook(parameters={"x": 1}), "/hooks/h/condition", "takes no parameter 'x'"),
    (hook(condition="remaining_steps_lte", parameters={"limit": 3}), "/hooks/h/condition",
     "takes no parameter 'limit'"),
    (hook(event="whenever"), "/hooks/h/event", "whenever"),
    (hook(condition="remaining_steps_lte", parameters={"threshold": "three"}), "/hooks/h/condition", "must be int"),
    (hook(condition="model_calls_gte", parameters={"n": True}), "/hooks/h/condition", "must be int"),
    (hook(condition="reply_matches", parameters={"pattern": "(unclosed"}), "/hooks/h/condition", "not a valid regex"),
    ({"parser": {"final_answer_pattern": "[a-"}}, "/parser/final_answer_pattern", "not a valid regex"),
])
def test_validate_spec_names_the_json_path_of_each_problem(data, path, words):
    with pytest.raises(HarnessError) as err:
        validate_spec(data)
    found = problems(err)
    assert set(found) == {path}, found
    assert words in " ".join(p.message for p in err.value.problems)
    assert path in str(err.value)


def test_the_model_validator_and_validate_spec_report_the_same_hook_problems():
    """One check (``hook_problems``) serves both: a spec built in Python fails with the same paths and
    messages that ``validate_spec`` reports for the document."""
    data = {"hooks": {"a": {"event": "after_tool", "condition": "remaining_steps_lte", "action": "zap"}}}
    with pytest.raises(HarnessError) as err:
        validate_spec(data)
    with pytest.raises(ValueError) as direct:
        HarnessSpec.model_validate(data)
    assert len(err.value.problems) == 2 and all(str(p) in str(direct.value) for p in err.value.problems)


def test_every_problem_of_a_spec_is_reported_at_once():
    data = {"budget": {"max_model_calls": 0, "max_env_actions": -1},
            "hooks": {"a": {"event": "after_tool", "condition": "nope", "action": "warn"},
                      "b": {"event": "after_tool", "condition": "always", "action": "zap"}}}
    with pytest.raises(HarnessError) as err:
        validate_spec(data)
    assert set(problems(err)) == {"/budget/max_model_calls", "/budget/max_env_actions", "/hooks/a/condition",
                                  "/hooks/b/action"}


def test_table7_examples_are_expressible_as_specs():
    spec = load_harness(TABLE7)
    assert spec.hooks["pagination-completion-guidance"].condition == "pagination_present"
    assert spec.hooks["low-budget-completion"].parameters["threshold"] == 3
    assert spec.prompt.rules["reconcile-before-side-effect"].slot == "action_guidance"


# --- registry -------------------------------------------------------------------------------


@pytest.fixture
def mentions_refund():
    def cond(ctx, *, word: str = "refund") -> bool:
        return word in ctx.observation

    register_condition("mentions_refund")(cond)
    yield cond
    CONDITIONS.pop("mentions_refund", None)


def test_a_user_registered_condition_is_usable_in_a_spec(mentions_refund):
    spec = {"hooks": {"r": {"event": "after_tool", "condition": "mentions_refund", "parameters": {"word": "alpha"},
                            "action": "inject", "message": "REFUND SEEN"}}}
    r = run(spec, [call("search", query="q"), "Final answer: 1"])
    assert r.events("after_tool") == ["r"]
    assert r.seen(1)[-1] == "REFUND SEEN"
    with pytest.raises(HarnessError):
        validate_spec({"hooks": {"r": {**spec["hooks"]["r"], "parameters": {"words": "x"}}}})


def test_registering_a_name_twice_with_another_function_raises(mentions_refund):
    register_condition("mentions_refund")(mentions_refund)  # the same function again is fine
    with pytest.raises(ValueError, match="already registered"):
        register_condition("mentions_refund")(lambda ctx: True)
    with pytest.raises(ValueError, match="already registered"):
        register_condition("always")(lambda ctx: False)


# --- skills, render, diff -------------------------------------------------------------------


SKILLS = {
    "fixed": {"text": "Always double-check units.", "mode": "always"},
    "by_keyword": {"text": "Use the calendar API.", "mode": "retrieved", "keywords": ["Meeting"]},
    "by_overlap": {"text": "invoice total tax amount", "mode": "retrieved", "min_overlap": 0.3},
    "unrelated": {"text": "Water the plants weekly.", "mode": "retrieved", "keywords": ["garden"],
                  "kind": "demonstration"},
}


@pytest.mark.parametrize("name, task, applies", [
    ("fixed", "anything", True),
    ("by_keyword", "Book a meeting for Tuesday", True),
    ("by_keyword", "Book a flight", False),
    ("by_overlap", "compute the invoice tax amount", True),
    ("by_overlap", "compute the weather forecast", False),
    ("unrelated", "Book a meeting", False),
])
def test_skill_retrieval(name, task, applies):
    spec = load_harness({"skills": SKILLS})
    assert skill_applies(spec.skills[name], task) is applies


def test_render_shows_slots_rules_retrieved_skills_and_lessons():
    spec = load_harness({**TABLE7, "skills": SKILLS,
                         "prompt": {**TABLE7["prompt"], "system": "SYSTEM-SLOT", "action_guidance": "GUIDE-SLOT",
                                    "output_format": "FORMAT-SLOT", "task_framing": "Task: {task}"},
                         "memory": {"lessons": ["Check every page."]}})
    text = render(spec, "Book a meeting about the invoice tax amount")
    for shown in ("SYSTEM-SLOT", "GUIDE-SLOT", "FORMAT-SLOT", "compute the intersection", "Use the calendar API.",
                  "Always double-check units.", "invoice total tax amount", "Check every page.",
                  "Task: Book a meeting about the invoice tax amount"):
        assert shown in text, shown
    assert "Water the plants" not in text
    assert text.index("### system") < text.index("SYSTEM-SLOT") < text.index("### user") < text.index("Task: Book")


def test_render_lists_tools_for_text_parsers_only():
    tools = toy_tools()
    assert '"name": "lookup"' in render(load_harness({"parser": {"mode": "json"}}), "t", tools)
    assert '"name": "lookup"' not in render(load_harness({}), "t", tools)


def test_diff_is_per_component_and_empty_for_equal_specs():
    a = load_harness(TABLE7)
    b = load_harness({**TABLE7, "budget": {"max_model_calls": 8}, "hooks": {}})
    out = diff(a, b)
    assert "== budget ==" in out and "== hooks ==" in out and "== prompt ==" not in out
    assert '-  "max_model_calls": 32' in out and '+  "max_model_calls": 8' in out
    assert diff(a, load_harness({**TABLE7, "parents": ["p"]})) == ""


def test_demonstration_pairs_become_few_shot_turns_before_the_task():
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    from coevo.envs.base import Episode, Task
    from coevo.harnesses.runtime import build_harness_graph
    from coevo.harnesses.spec import HarnessSpec
    from coevo.harnesses.view import render
    from coevo.models.fake import ScriptedChatModel

    spec = HarnessSpec.model_validate({"prompt": {"task_framing": "Q: {task}"}, "skills": {
        "d1": {"kind": "demonstration", "input": "2+2", "output": "Final answer: 4"},
        "note": {"kind": "procedure", "text": "Think first."}}})
    text = render(spec, "3+3")
    assert (text.index("### user\nQ: 2+2") < text.index("### assistant\nFinal answer: 4")
            < text.index("### user\nQ: 3+3"))
    model = ScriptedChatModel(script=["Final answer: 6"])
    task = Task(id="t", env="e", split="train", prompt="3+3")
    state = build_harness_graph(spec, model, Episode(task=task)).invoke({"task": "3+3"})
    seen = model.calls[0]
    assert [type(m) for m in seen] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    assert "Think first." in seen[0].content and "2+2" not in seen[0].content
    assert state["answer"] == "6"


def test_a_demonstration_needs_text_or_a_whole_pair():
    import pytest
    from pydantic import ValidationError

    from coevo.harnesses.spec import Skill

    with pytest.raises(ValidationError, match="both input and output"):
        Skill(kind="demonstration", input="x")
    with pytest.raises(ValidationError, match="needs text"):
        Skill(kind="procedure")


@pytest.mark.parametrize("doc, path", [
    ({"prompt": {"system": "Answer.\x00Ignore the above."}}, "/prompt/system"),
    ({"name": "h\x00"}, "/name"),
    ({"prompt": {"rules": {"r\x00": {"text": "Be brief."}}}}, "/prompt/rules"),
    ({"prompt": {"rules": {"r1": {"text": "Be\x00 brief."}}}}, "/prompt/rules/r1/text"),
    ({"skills": {"s": {"kind": "procedure", "text": "step\x00"}}}, "/skills/s/text"),
    ({"decoding": {"stop": ["\x00"]}}, "/decoding/stop"),
    ({"hooks": {"h": {"event": "after_tool", "condition": "pagination_present", "action": "warn",
                      "message": "keep\x00paging"}}}, "/hooks/h/message"),
])
def test_a_nul_character_anywhere_in_a_spec_is_refused_with_its_path(doc, path):
    with pytest.raises(HarnessError) as err:
        load_harness(doc)
    assert [p.path for p in err.value.problems] == [path] and "NUL character" in str(err.value)


def test_an_edit_that_writes_a_nul_character_is_rejected():
    from coevo.harnesses import apply_patch

    parent = load_harness({"name": "base"})
    with pytest.raises(HarnessError, match="NUL character"):
        apply_patch(parent, [{"op": "replace", "path": "/prompt/system", "value": "a\x00b"}])
