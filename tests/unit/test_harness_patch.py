"""Edits as RFC 6902 JSON Patches: children, ids, and every way a patch is rejected."""

from __future__ import annotations

import json

import pytest

from coevo.harnesses import HarnessError, HarnessSpec, apply_patch, check_tools, load_harness, make_patch

TOOLS = ["search", "lookup", "echo", "boom"]
WARN = {"event": "after_tool", "condition": "pagination_present", "action": "warn", "message": "keep paging"}


@pytest.fixture
def parent() -> HarnessSpec:
    return load_harness({"name": "base", "prompt": {"rules": {"r1": {"text": "Be brief."}}}})


def rejected(parent: HarnessSpec, patch, tools=None) -> HarnessError:
    with pytest.raises(HarnessError) as err:
        apply_patch(parent, patch, tools=tools)
    assert len(str(err.value)) < 2000, "the error message must stay readable"
    return err.value


def paths(err: HarnessError) -> list[str]:
    return [p.path for p in err.problems]


# --- children -------------------------------------------------------------------------------


def test_a_patch_yields_a_child_whose_parent_is_the_patched_spec(parent):
    child = apply_patch(parent, [{"op": "add", "path": "/hooks/page", "value": WARN},
                                 {"op": "replace", "path": "/budget/max_model_calls", "value": 8}])
    assert child.parents == [parent.id]
    assert child.id != parent.id
    assert child.hooks["page"].condition == "pagination_present" and child.budget.max_model_calls == 8
    assert parent.hooks == {} and parent.budget.max_model_calls == 32, "the parent is never mutated"


def test_the_same_patch_gives_the_same_child_id_and_json_text_patches_work(parent):
    ops = [{"op": "add", "path": "/hooks/page", "value": WARN}]
    assert apply_patch(parent, ops).id == apply_patch(parent, json.dumps(ops)).id


def test_a_no_op_patch_keeps_the_content_id_but_records_the_parent(parent):
    child = apply_patch(parent, [{"op": "test", "path": "/name", "value": "base"}])
    assert child.id == parent.id and child.parents == [parent.id]


def test_make_patch_round_trips(parent):
    target = load_harness({"name": "other", "hooks": {"page": WARN}, "context": {"history_turns": 4}})
    ops = make_patch(parent, target)
    assert apply_patch(parent, ops).id == target.id
    assert make_patch(parent, parent) == []


# --- rejections: the patch does not apply ---------------------------------------------------


def test_a_patch_to_a_missing_path_gives_one_readable_error(parent):
    err = rejected(parent, [{"op": "replace", "path": "/nope/deeper", "value": 1}])
    assert paths(err) == ["/nope/deeper"]
    assert "does not apply" in str(err) and "'nope'" in str(err)
    assert "schema_version" not in str(err), "the whole document must not be dumped into the message"


def test_removing_a_missing_member_is_rejected(parent):
    assert paths(rejected(parent, [{"op": "remove", "path": "/hooks/ghost"}])) == ["/hooks/ghost"]


def test_a_failing_test_op_rejects_the_patch(parent):
    err = rejected(parent, [{"op": "test", "path": "/name", "value": "someone else"},
                            {"op": "replace", "path": "/name", "value": "x"}])
    assert paths(err) == ["/name"] and "(test)" in str(err)


@pytest.mark.parametrize("patch, words", [
    ([{"op": "frobnicate", "path": "/name"}], "Unknown operation"),
    ([{"op": "add", "value": 1}], "'path'"),
    ({"op": "add", "path": "/name", "value": "x"}, "sequence of operations"),
    ("this is not JSON", "not a JSON Patch"),
    ('{"op": "add"}', "not a JSON Patch"),
])
def test_a_malformed_patch_is_rejected(parent, patch, words):
    err = rejected(parent, patch)
    assert len(err.problems) == 1 and words in str(err)
    assert "RFC 6902" in str(err)


def test_every_operation_that_does_not_apply_is_reported(parent):
    err = rejected(parent, [{"op": "replace", "path": "/a", "value": 1}, {"op": "remove", "path": "/b"},
                            {"op": "test", "path": "/name", "value": "nope"}])
    assert paths(err) == ["/a", "/b", "/name"]
    assert "operation 0" in str(err) and "operation 2" in str(err)


# --- rejections: a malformed JSON Pointer (an LLM's reply) ----------------------------------


@pytest.mark.parametrize("op, where, words", [
    ({"op": "replace", "path": "prompt/system", "value": "x"}, "prompt/system", "did you mean '/prompt/system'?"),
    ({"op": "add", "path": "hooks/page", "value": WARN}, "hooks/page", "did you mean '/hooks/page'?"),
    ({"op": "remove", "path": "prompt/rules/r1"}, "prompt/rules/r1", "did you mean '/prompt/rules/r1'?"),
    ({"op": "test", "path": "name", "value": "base"}, "name", "did you mean '/name'?"),
    ({"op": "replace", "path": "#/prompt/system", "value": "x"}, "#/prompt/system", "did you mean '/prompt/system'?"),
    ({"op": "replace", "path": "/prompt/~2x", "value": "x"}, "/prompt/~2x", "invalid escape"),
    ({"op": "replace", "path": "/prompt/rules/r~", "value": "x"}, "/prompt/rules/r~", "invalid escape"),
    ({"op": "replace", "path": 3, "value": "x"}, "", "path 3 is not a JSON Pointer"),
    ({"op": "replace", "path": None, "value": "x"}, "", "path None is not a JSON Pointer"),
    ({"op": "replace", "path": ["/name"], "value": "x"}, "", "is not a JSON Pointer"),
    ({"op": "move", "from": "prompt/system", "path": "/prompt/rules/r2"}, "/prompt/rules/r2",
     "from 'prompt/system' is not a JSON Pointer (did you mean '/prompt/system'?)"),
    ({"op": "copy", "from": 7, "path": "/prompt/system"}, "/prompt/system", "from 7 is not a JSON Pointer"),
    ({"op": "copy", "path": "/prompt/system"}, "/prompt/system", "a copy names its source in 'from'"),
])
def test_a_malformed_json_pointer_is_a_rejection_naming_the_fix(parent, op, where, words):
    for patch in ([op], json.dumps([op])):  # a reply's list, or its JSON text
        err = rejected(parent, patch)
        assert paths(err) == [where] and "operation 0 is malformed" in str(err)
        assert words in str(err) and "RFC 6902" in str(err)


def test_every_malformed_pointer_is_reported_and_nothing_applies(parent):
    err = rejected(parent, [{"op": "replace", "path": "prompt/system", "value": "x"},
                            {"op": "replace", "path": "/budget/max_model_calls", "value": 8},
                            {"op": "remove", "path": "hooks/x"}])
    assert paths(err) == ["prompt/system", "hooks/x"]
    assert "operation 0" in str(err) and "operation 2" in str(err)


@pytest.mark.parametrize("value", ["x", 3, None, ["a"]])
def test_replacing_the_whole_harness_with_a_non_object_is_a_rejection(parent, value):
    err = rejected(parent, [{"op": "replace", "path": "", "value": value}])
    assert paths(err) == [""] and "replaces the whole harness" in str(err)


# --- rejections: the result is invalid ------------------------------------------------------


def add_hook(**kw) -> list[dict]:
    return [{"op": "add", "path": "/hooks/h", "value": {**WARN, **kw}}]


@pytest.mark.parametrize("patch, path, words", [
    ([{"op": "replace", "path": "/budget/max_env_actions", "value": -5}], "/budget/max_env_actions", "greater than"),
    ([{"op": "add", "path": "/budget/max_turns", "value": 5}], "/budget/max_turns", "Extra inputs"),
    ([{"op": "replace", "path": "/parser/mode", "value": "xml"}], "/parser/mode", "native"),
    (add_hook(condition="moon_is_full"), "/hooks/h/condition", "unknown hook condition 'moon_is_full'"),
    (add_hook(action="explode"), "/hooks/h/action", "unknown hook action 'explode'"),
    (add_hook(condition="remaining_steps_lte"), "/hooks/h/condition", "needs parameter 'threshold'"),
    (add_hook(condition="model_calls_gte", parameters={"count": 2}), "/hooks/h/condition",
     "takes no parameter 'count'"),
    (add_hook(event="on_sunday"), "/hooks/h/event", "on_sunday"),
])
def test_a_patch_with_an_invalid_result_is_rejected(parent, patch, path, words):
    err = rejected(parent, patch)
    assert set(paths(err)) == {path}
    assert words in str(err)
    assert str(err).startswith("patched harness is invalid")


def test_a_patch_with_several_bad_things_reports_all_of_them(parent):
    err = rejected(parent, [{"op": "replace", "path": "/budget/max_model_calls", "value": 0},
                            {"op": "add", "path": "/hooks/x", "value": {**WARN, "condition": "nope"}},
                            {"op": "add", "path": "/hooks/y", "value": {**WARN, "action": "zap"}},
                            {"op": "add", "path": "/context/history_turns", "value": 0}])
    assert set(paths(err)) == {"/budget/max_model_calls", "/hooks/x/condition", "/hooks/y/action",
                               "/context/history_turns"}
    assert f"({len(err.problems)} problem(s))" in str(err)


# --- rejections: the tool view names tools the env lacks ------------------------------------


@pytest.mark.parametrize("view, bad_paths", [
    ({"exposed": ["search", "teleport"]}, ["/tool_view/exposed/1"]),
    ({"renames": {"teleport": "tp"}}, ["/tool_view/renames/teleport"]),
    ({"descriptions": {"teleport": "Beam me up."}}, ["/tool_view/descriptions/teleport"]),
    ({"renames": {"search": "lookup"}}, ["/tool_view/renames"]),
    ({"exposed": ["ghost", "echo", "boom"], "renames": {"echo": "boom"}},
     ["/tool_view/exposed/0", "/tool_view/renames"]),
])
def test_check_tools_rejects_unknown_and_colliding_tools(view, bad_paths):
    with pytest.raises(HarnessError) as err:
        check_tools(load_harness({"tool_view": view}), TOOLS)
    assert paths(err.value) == bad_paths


def test_renaming_onto_an_unexposed_name_does_not_collide():
    check_tools(load_harness({"tool_view": {"exposed": ["search"], "renames": {"search": "lookup"}}}), TOOLS)


@pytest.mark.parametrize("view, choice", [
    ({}, "teleport.to"),                                              # no such env tool
    ({"exposed": ["search"]}, "lookup.key"),                          # an env tool the view hides
    ({"renames": {"lookup": "fetch"}}, "lookup.key"),                 # the old name of a renamed tool
])
def test_check_tools_rejects_a_choice_action_on_a_tool_the_model_is_not_shown(view, choice):
    with pytest.raises(HarnessError) as err:
        check_tools(load_harness({"tool_view": view, "parser": {"choice_action": choice}}), TOOLS)
    assert paths(err.value) == ["/parser/choice_action"] and "not shown" in str(err.value)
    ok = {"tool_view": {**view, "exposed": None}, "parser": {"choice_action": "search.query"}}
    check_tools(load_harness(ok), TOOLS)
    check_tools(load_harness({"tool_view": {"renames": {"lookup": "fetch"}}, "parser": {"choice_action": "fetch.key"}}),
                TOOLS)


def test_apply_patch_checks_the_tool_view_when_given_the_env_tools(parent):
    ops = [{"op": "replace", "path": "/tool_view/renames", "value": {"teleport": "tp"}}]
    apply_patch(parent, ops)  # without tools the view cannot be checked
    err = rejected(parent, ops, tools=TOOLS)
    assert paths(err) == ["/tool_view/renames/teleport"] and "unknown tool 'teleport'" in str(err)
    ok = apply_patch(parent, [{"op": "add", "path": "/tool_view/renames/search", "value": "find"}], tools=TOOLS)
    assert ok.tool_view.renames == {"search": "find"}
