"""Hooks (Harness-S Table 7): every event, built-in condition and action, seen through real graph runs.

Each test asserts what the model received at its next call, the stop reason, or the hook events.
"""

from __future__ import annotations

from harness_kit import INTERSECTION_RULE, LOW_BUDGET_HOOK, PAGE, PAGINATION_HOOK, call, run


def hooks(**named: dict) -> dict:
    """A spec dict whose hooks are ``name=(event, condition, action, message[, parameters])``."""
    out = {}
    for name, (event, condition, action, message, *params) in named.items():
        out[name] = {"event": event, "condition": condition, "action": action, "message": message,
                     "parameters": params[0] if params else {}}
    return {"hooks": out}


# --- events and actions ---------------------------------------------------------------------


def test_before_model_inject_always_appends_harness_text_before_every_call():
    r = run(hooks(h=("before_model", "always", "inject", "THINK FIRST")), [call("lookup", key="k"), "Final answer: 1"])
    assert r.seen(0)[-1] == "THINK FIRST" and r.seen(1)[-1] == "THINK FIRST"
    assert r.events() == ["h", "h"] and r.events("before_model") == ["h", "h"]


def test_after_tool_warn_prefixes_warning():
    r = run(hooks(h=("after_tool", "tool_is", "warn", "check it", {"name": "lookup"})),
            [call("echo", text="x"), call("lookup", key="k"), "Final answer: 1"])
    assert r.seen(1)[-1] == "x", "tool_is does not fire for another tool"
    assert r.seen(2)[-2:] == ["value of k", "Warning: check it"]
    assert r.events("after_tool") == ["h"]


def test_on_tool_error_fires_for_a_raising_tool_only():
    r = run(hooks(h=("on_tool_error", "tool_error", "inject", "The tool failed; try lookup.")),
            [call("lookup", key="k"), call("boom"), "Final answer: 1"])
    assert r.seen(2)[-2:] == ["Error: RuntimeError: disk on fire", "The tool failed; try lookup."]
    assert r.state["hook_events"] == [{"hook": "h", "event": "on_tool_error", "action": "inject"}]


def test_after_model_retry_drops_the_reply_and_asks_again():
    r = run(hooks(h=("after_model", "reply_matches", "retry", "Do not guess.", {"pattern": "(?i)guess"})),
            ["I guess 7", "Final answer: 42"])
    assert "I guess 7" not in r.seen(1), "the retried reply is removed from the context"
    assert r.seen(1)[-1] == "Do not guess."
    assert all(m.content != "I guess 7" for m in r.state["messages"])
    assert r.state["answer"] == "42" and r.state["model_calls"] == 2 and r.events("after_model") == ["h"]


def test_retry_outside_after_model_only_injects():
    r = run(hooks(h=("after_tool", "always", "retry", "again")), [call("lookup", key="k"), "Final answer: 1"])
    assert r.seen(1)[-2:] == ["value of k", "again"]
    assert any(m.type == "ai" and m.tool_calls for m in r.model.calls[1]), "the tool-call reply is kept"


def test_after_model_block_refuses_the_tool_calls():
    r = run(hooks(h=("after_model", "reply_matches", "block", "Never delete.", {"pattern": "delete"})),
            [call("echo", content="I will delete it", text="rm"), "Final answer: kept"])
    assert r.log == [], "a blocked action never runs"
    assert r.seen(1)[-2:] == ["Not executed.", "Never delete."]
    assert r.state.get("env_actions", 0) == 0 and r.state["answer"] == "kept"


def test_before_finish_block_refuses_an_empty_answer():
    r = run({"parser": {"mode": "json"}, **hooks(h=("before_finish", "answer_empty", "block", "Give an answer."))},
            ['{"final_answer": "  "}', '{"final_answer": "42"}'])
    assert r.seen(1)[-1] == "Give an answer."
    assert r.state["answer"] == "42" and r.events("before_finish") == ["h"]


def test_before_finish_answer_matches_blocks_a_matching_answer():
    r = run(hooks(h=("before_finish", "answer_matches", "block", "Commit to an answer.", {"pattern": "(?i)unknown"})),
            ["Final answer: Unknown", "Final answer: 42"])
    assert r.seen(1)[-1] == "Commit to an answer." and r.state["answer"] == "42"


def test_before_finish_inject_does_not_refuse_the_answer():
    r = run(hooks(h=("before_finish", "always", "inject", "noted")), ["Final answer: 3"])
    assert r.state["answer"] == "3" and r.state["stop_reason"] == "final_answer" and r.events() == ["h"]


def test_after_tool_block_replaces_the_tool_output():
    r = run(hooks(h=("after_tool", "observation_matches", "block", "[redacted]", {"pattern": "value of secret"})),
            [call("lookup", key="secret"), call("lookup", key="open"), "Final answer: 1"])
    assert r.seen(1)[-1] == "[redacted]" and "value of secret" not in r.seen_text(2)
    assert r.seen(2)[-1] == "value of open"


def test_stop_ends_the_episode_with_the_hook_name_as_reason():
    r = run(hooks(h=("after_model", "reply_matches", "stop", "bye", {"pattern": "give up"})),
            ["I give up", "Final answer: never reached"])
    assert r.state["stop_reason"] == "hook:h" and len(r.model.calls) == 1
    assert r.state["answer"] == "I give up", "a stop keeps the answer the reply gave (on_no_action=finish)"


def test_stop_names_the_hook_that_stopped_not_the_last_one_fired():
    spec = hooks(stopper=("after_model", "always", "stop", "halt"), chatter=("after_model", "always", "warn", "w"))
    r = run(spec, [call("lookup", key="k")])
    assert r.state["stop_reason"] == "hook:stopper"
    assert r.log == [], "a stop in after_model keeps the parsed actions from running"
    tool_msgs = [m for m in r.state["messages"] if m.type == "tool"]
    assert [m.content for m in tool_msgs] == ["Not executed."], "every native tool call gets a result"


def test_model_calls_gte_stop_before_model():
    r = run(hooks(h=("before_model", "model_calls_gte", "stop", "", {"n": 2})), [call("lookup", key="k")])
    assert len(r.model.calls) == 2 and r.state["stop_reason"] == "hook:h"


def test_after_tool_stop_skips_the_remaining_actions():
    r = run({"parser": {"mode": "python_call"}, **hooks(h=("after_tool", "tool_is", "stop", "", {"name": "echo"}))},
            ['[echo(text="a"), lookup(key="b")]'])
    assert r.log == [("echo", {"text": "a"})] and r.state["stop_reason"] == "hook:h"
    assert r.state["messages"][-1].content.endswith("Not executed: the episode has ended.")


def test_unparsed_reply_condition_fires_on_violations():
    spec = {"parser": {"mode": "json", "on_no_action": "violation", "violation_message": "Reply in JSON."},
            **hooks(h=("after_model", "unparsed_reply", "inject", "Example: {\"final_answer\": 1}"))}
    r = run(spec, ["free text", '{"final_answer": 1}'])
    assert r.seen(1)[-2].startswith("Reply in JSON.") and r.seen(1)[-1] == 'Example: {"final_answer": 1}'
    assert r.events() == ["h"] and r.state["violations"] == 1


def test_a_condition_that_does_not_hold_does_not_fire():
    r = run(hooks(h=("after_tool", "pagination_present", "warn", "more pages")),
            [call("lookup", key="k"), "Final answer: 1"])
    assert r.events() == [] and r.seen(1)[-1] == "value of k"


# --- Harness-S Table 7 ----------------------------------------------------------------------


def test_table7_case1_pagination_reminder_fires_after_a_paginated_output():
    r = run({"hooks": {"pg": PAGINATION_HOOK}},
            [call("search", query="inbox"), call("lookup", key="k"), "Final answer: 1"])
    assert r.seen(1)[-2:] == [PAGE, "Warning: " + PAGINATION_HOOK["message"]]
    assert r.events("after_tool") == ["pg"], "the lookup output has no pagination metadata"


def test_table7_case2_action_guidance_rule_is_in_the_system_prompt():
    r = run({"prompt": {"action_guidance": "Use tools.", "rules": {"reconcile": INTERSECTION_RULE}}},
            ["Final answer: 1"])
    system = r.seen(0)[0]
    assert "Use tools.\n" + INTERSECTION_RULE["text"] in system


def test_table7_case3_low_budget_reminder_fires_at_three_remaining_steps():
    script = [call("lookup", key=str(i)) for i in range(4)] + ["Final answer: 1"]
    r = run({"budget": {"max_model_calls": 6, "max_env_actions": 30}, "hooks": {"low": LOW_BUDGET_HOOK}}, script)
    warning = "Warning: " + LOW_BUDGET_HOOK["message"]
    # after tool k (k model calls made) the remaining steps are 6 - k: 5, 4, 3, 2
    assert [warning in r.seen(i) for i in range(1, 5)] == [False, False, True, True]
    assert r.events("after_tool") == ["low", "low"] and r.state["answer"] == "1"


def test_remaining_steps_counts_the_env_action_budget_too():
    r = run({"budget": {"max_model_calls": 32, "max_env_actions": 4}, "hooks": {"low": LOW_BUDGET_HOOK}},
            [call("lookup", key="a"), "Final answer: 1"])
    assert r.events() == ["low"], "after one action 3 env actions remain"
