"""Parser modes: native tool calls, JSON actions, python-call lists, text with a final-answer pattern."""

from __future__ import annotations

import pytest
from harness_kit import call, run
from langchain_core.messages import AIMessage

from coevo.harnesses.parse import last_answer_match, parse_python_calls, parse_reply, strip_fences
from coevo.harnesses.spec import Parser


def parse(text: str | AIMessage, **parser):
    return parse_reply(text if isinstance(text, AIMessage) else AIMessage(content=text), Parser(**parser))


# --- native ---------------------------------------------------------------------------------


def test_native_tool_calls_become_actions_with_their_ids():
    reply = AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"key": "k"}, "id": "c1"},
                                              {"name": "echo", "args": {"text": "t"}, "id": "c2"}])
    got = parse(reply)
    assert [(a.name, a.args, a.id) for a in got.actions] == [("lookup", {"key": "k"}, "c1"),
                                                            ("echo", {"text": "t"}, "c2")]
    assert got.answer is None and got.error == ""


def test_native_text_reply_with_final_answer_pattern_is_an_answer():
    assert parse("Thinking... Final Answer: 42").answer == "42"


def test_tool_calls_are_ignored_outside_native_mode():
    reply = AIMessage(content="Final answer: 7", tool_calls=[{"name": "lookup", "args": {}, "id": "c1"}])
    assert parse(reply, mode="text").actions == [] and parse(reply, mode="text").answer == "7"


# --- json -----------------------------------------------------------------------------------


def test_json_action_in_text():
    got = parse('I will look.\n{"tool": "lookup", "arguments": {"key": "k"}} thanks', mode="json")
    assert [(a.name, a.args) for a in got.actions] == [("lookup", {"key": "k"})]


def test_json_final_answer():
    assert parse('{"final_answer": 42}', mode="json").answer == "42"


# --- python_call ----------------------------------------------------------------------------


def test_python_call_list():
    got = parse('Plan: [lookup(key="k"), echo(text=\'hi\'), add(a=1, b=[2, 3])]', mode="python_call")
    assert [(a.name, a.args) for a in got.actions] == [("lookup", {"key": "k"}), ("echo", {"text": "hi"}),
                                                       ("add", {"a": 1, "b": [2, 3]})]


def test_python_call_dotted_name():
    assert parse_python_calls("[math.add(a=1)]").actions[0].name == "math.add"


@pytest.mark.parametrize("mode, text, words", [
    ("json", '{"tool": "lookup", "arguments": {"key": ', "malformed JSON"),
    ("json", '{"arguments": {"key": "k"}}', '"tool"'),
    ("json", '{"tool": "lookup", "arguments": [1]}', '"arguments"'),
    ("python_call", "[add(1, b=2)]", "positional"),
    ("python_call", "[lookup(key=some_variable)]", "not a literal"),
    ("python_call", "[lookup(key=1 + open('x'))]", "not a literal"),
])
def test_broken_actions_are_violations_even_when_no_action_means_finish(mode, text, words):
    got = parse(text, mode=mode, on_no_action="finish")
    assert got.actions == [] and got.answer is None and words in got.error


def test_python_call_without_a_list_falls_back_to_the_final_answer():
    assert parse("no calls here. Final answer: 9", mode="python_call").answer == "9"
    assert parse_python_calls("no calls here") is None


# --- text, final answer, no action ----------------------------------------------------------


def test_text_mode_uses_the_final_answer_pattern():
    assert parse("Work... final answer:  Paris ", mode="text").answer == "Paris"


def test_a_custom_final_answer_pattern_uses_group_1():
    assert parse("blah ANSWER=17 blah", mode="text", final_answer_pattern=r"ANSWER=(\d+)").answer == "17"


def test_no_action_finish_takes_the_whole_reply_as_answer():
    assert parse("  just words  ", mode="text", on_no_action="finish").answer == "just words"
    assert parse("just words", mode="text", final_answer_pattern=None).answer == "just words"


def test_no_action_violation_is_an_error():
    got = parse("just words", mode="text", on_no_action="violation")
    assert got.answer is None and got.actions == [] and "no action" in got.error


def test_strip_code_fences():
    fenced = "```\nFinal answer: 42\n```"
    assert parse(fenced, mode="text", strip_code_fences=True).answer == "42"
    assert parse(fenced, mode="text").answer != "42"
    assert strip_fences("a ```python\n[f(a=1)]\n``` b") == "a [f(a=1)]\n b"


# --- through the graph ----------------------------------------------------------------------


def test_json_mode_runs_the_tool_and_shows_the_output_as_harness_text():
    r = run({"parser": {"mode": "json"}}, ['{"tool": "lookup", "arguments": {"key": "k"}}', '{"final_answer": "v"}'])
    assert r.log == [("lookup", {"key": "k"})]
    assert r.seen(1)[-1] == "[lookup output]\nvalue of k"
    assert r.state["answer"] == "v" and r.state["stop_reason"] == "final_answer"
    assert '"name": "lookup"' in r.seen(0)[0], "text parsers list the tools in the system prompt"


def test_python_call_mode_runs_every_call_in_order():
    r = run({"parser": {"mode": "python_call"}}, ['[lookup(key="a"), echo(text="b")]', "Final answer: done"])
    assert r.log == [("lookup", {"key": "a"}), ("echo", {"text": "b"})]
    assert r.seen(1)[-2:] == ["[lookup output]\nvalue of a", "[echo output]\nb"]


def test_native_mode_runs_tool_calls_and_answers_with_tool_messages():
    r = run({}, [call("lookup", key="z"), "Final answer: ok"])
    assert [m.type for m in r.model.calls[1]][-2:] == ["ai", "tool"]
    assert r.seen(1)[-1] == "value of z" and r.state["answer"] == "ok"


def test_a_violation_is_counted_and_the_model_is_asked_again():
    spec = {"parser": {"mode": "python_call", "on_no_action": "violation", "violation_message": "Use [f(a=1)]."}}
    r = run(spec, ["[lookup('k')]", "hmm", '[lookup(key="k")]', "Final answer: v"])
    assert r.state["violations"] == 2
    assert r.seen(1)[-1].startswith("Use [f(a=1)].") and "positional" in r.seen(1)[-1]
    assert r.seen(2)[-1].startswith("Use [f(a=1)].") and "no action" in r.seen(2)[-1]
    assert r.log == [("lookup", {"key": "k"})] and r.state["answer"] == "v"


def test_no_action_finish_ends_with_the_reply_as_answer():
    r = run({"parser": {"mode": "text", "on_no_action": "finish"}}, ["The answer is 5."])
    assert r.state["answer"] == "The answer is 5." and r.state["violations"] == 0 and len(r.model.calls) == 1


# --- the last complete answer span (issue 17) -----------------------------------------------


@pytest.mark.parametrize("text, answer", [
    ("Final answer: a, b\nFinal answer: foo, bar", "foo, bar"),
    ("Final answer: foo, bar\nFinal answer: a, b", "a, b"),
    ("final answer: 1\nwait... FINAL ANSWER:2", "2"),
    ("Final answer: x\n\nFinal answer: y\nz", "y\nz"),  # a span runs to the end: multi-line answers stay whole
])
def test_the_last_final_answer_marker_wins(text, answer):
    assert parse(text, mode="text").answer == answer
    assert parse(text).answer == answer  # native mode, no tool calls: the same reading


@pytest.mark.parametrize("pattern, text, answer", [
    (r"(\d+)", "I think 1000, no: 2000", "2000"),  # marker-less: the last whole match, not its tail
    (r"(\d+)", "1000", "1000"),
    (r"ANSWER=(\d+)", "ANSWER=17 ... ANSWER=18", "18"),
    (r"(?s)<answer>\s?(.*?)\s?</answer>", "<answer>a</answer> then <answer> b </answer>", "b"),
    (r"(?s)answer is (.+)", "the answer is 3; no, the answer is 4", "4"),
    (r"\d+", "1 and 22", "22"),  # no group: the whole match
    (r"(?s)(.*)", "all of it", "all of it"),  # the empty match at the end never replaces a real one
])
def test_last_answer_match_takes_the_last_complete_span(pattern, text, answer):
    assert parse(text, mode="text", final_answer_pattern=pattern).answer == answer


def test_last_answer_match_agrees_with_reasoning_gyms_extract_answer():
    from reasoning_gym.utils import extract_answer

    pattern = r"(?s)<answer>\s?(.*?)\s?</answer>"  # reasoning-gym's own tag regex
    for text in ["<answer>1</answer>", "<answer>1</answer>\n<answer>2</answer>", "x <answer> a, b </answer> y",
                 "<answer>1</answer><answer>2", "<answer>\nline1\nline2\n</answer> and <answer>3</answer>"]:
        m = last_answer_match(pattern, text)
        assert (m.group(1).strip() if m else None) == extract_answer(text)


def test_a_pattern_group_that_did_not_take_part_gives_an_empty_answer():
    assert parse("B", mode="text", final_answer_pattern=r"(A)|B").answer == ""


def test_json_mode_takes_the_last_final_answer_object():
    text = '{"final_answer": "a"} no wait {"final_answer": "b"} {"note": 1}'
    assert parse(text, mode="json").answer == "b"
    assert parse('{"final_answer": "a"} {"final_answer": ', mode="json").answer == "a"  # the last COMPLETE one
    got = parse('{"tool": "lookup", "arguments": {"key": "k"}} {"final_answer": "b"}', mode="json")
    assert [a.name for a in got.actions] == ["lookup"] and got.answer is None  # an action first: act, then answer


# --- choice_action (numbered-choice envs) ---------------------------------------------------


@pytest.mark.parametrize("text, number", [("3", "3"), ("3.", "3"), (" 3) go north", "3"), ("option 12", "12"),
                                          ("Option 2: look", "2"), ("2\nBecause it leads north.", "2")])
def test_a_reply_starting_with_an_option_number_is_the_choice_action(text, number):
    got = parse(text, mode="text", final_answer_pattern=None, on_no_action="violation", choice_action="act.command")
    assert [(a.name, a.args) for a in got.actions] == [("act", {"command": number})] and got.error == ""


@pytest.mark.parametrize("text", ["I pick 3", "go 3", "3.5 metres", "30kg", "The room is dark."])
def test_a_reply_without_a_leading_option_number_is_no_choice(text):
    got = parse(text, mode="text", final_answer_pattern=None, on_no_action="violation", choice_action="act.command")
    assert got.actions == [] and got.error == "the reply has no action and no final answer"


def test_a_parsed_action_or_an_unset_choice_action_wins_over_a_number():
    got = parse('1 {"tool": "look", "arguments": {}}', mode="json", choice_action="act.command")
    assert [(a.name, a.args) for a in got.actions] == [("look", {})]
    assert parse("3", mode="text", final_answer_pattern=None, on_no_action="violation").actions == []


def test_choice_action_must_name_tool_and_argument_and_is_left_out_of_the_json_when_unset():
    with pytest.raises(ValueError):
        Parser(choice_action="act")
    assert "choice_action" not in Parser().model_dump() and Parser(choice_action="a.b").model_dump()["choice_action"]
