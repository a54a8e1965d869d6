"""The offline curator reads the trajectory (issue 23, item 1): each root cause from what the
trajectory shows, and directions per (cause, category), each supported by >= min_failed tasks."""

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict

from coevo.envs.base import Task
from coevo.harnesses import load_harness
from coevo.models.trajectory import Trajectory
from coevo.roles.curator import OfflineCurator
from coevo.roles.diagnosis import addresses, contains, diagnose, split_cause, task_category

H0 = load_harness("reasoning_gym")  # parser: "Final answer: ..."


def run(reply, answer, expected="7", passed=False, finish="stop", extra=(), task_id="t1", violations=0,
        stop="final_answer", detail=None):
    """A one-call trajectory whose model replied ``reply`` and whose parser took ``answer``."""
    msgs = [HumanMessage("What is 3 + 4?"), *extra,
            AIMessage(reply, response_metadata={"finish_reason": finish})]
    return Trajectory(task_id=task_id, split="train", final_answer=answer, passed=passed, reward=float(passed),
                      stop_reason=stop, messages=messages_to_dict(msgs), interface_violations=violations,
                      score_detail=detail if detail is not None else {"expected": expected, "got": answer})


TASK = Task(id="t1", env="e", split="train", prompt="What is 3 + 4?", metadata={"family": "chain_sum"})


@pytest.mark.parametrize("trajectory, cause", [
    (run("", None, stop="budget:model_calls"), "no_answer:budget:model_calls"),
    (run("x", "x", detail={"public": {"error_type": "simple_function_checker:wrong_func_name"}}),
     "simple_function_checker:wrong_func_name"),
    (run("Final answer: 7", "7", extra=[AIMessage("", tool_calls=[{"name": "python", "args": {}, "id": "c1"}]),
                                          ToolMessage("Error: TypeError: bad", tool_call_id="c1", name="python")]),
     "tool:python"),
    (run("3 + 4 is 7.\n3 + 4 is 7.\n3 + 4 is 7.", "3 + 4 is 7."), "loop:repetition"),
    (run("Let me add three and four step by step", "Let me add three and four step by step", finish="length"),
     "truncated:output_tokens"),
    (run("The sum of 3 and 4 is 7.", "The sum of 3 and 4 is 7."), "format:no_marker"),
    (run("Final answer: ", ""), "format:empty"),
    (run("Final answer: 7 apples", "7 apples"), "form:extra_text"),
    (run("I think 7. Final answer: 9", "9"), "place:elsewhere"),
    (run("Final answer: -7", "-7"), "value:sign"),
    (run("Final answer: 8", "8"), "value:off_by_one"),
    (run("Final answer: 3", "3"), "value:operand"),
    (run("Final answer: 12", "12"), "value:wrong"),
    (run("The sum of three and four is 12.", "The sum of three and four is 12."), "value:wrong"),
    (run("Final answer: seven", "seven", expected="abc", violations=1), "format:violation"),
    (run("Final answer: seven", "seven", expected="abc"), "wrong_answer"),
])
def test_diagnose_reads_each_cause_from_the_trajectory(trajectory, cause):
    assert diagnose(trajectory, H0, TASK) == cause


def test_a_short_bare_reply_is_an_answer_not_a_missing_marker():
    assert diagnose(run("12", "12"), H0, TASK) == "value:wrong"
    assert diagnose(run("The answer is twelve.", "The answer is twelve.", expected="abc"), H0, TASK) == \
        "format:no_marker"


def test_numbers_are_contained_whole_and_causes_split_into_kinds_and_category():
    assert contains("so -4.", "-4") and not contains("-4", "4") and not contains("14", "4")
    assert not contains("4.5", "4") and contains("abcde", "bcd")
    assert split_cause("format:no_marker@chain_sum + format:empty@chain_sum") == (
        ["format:no_marker", "format:empty"], "chain_sum")
    assert split_cause("value:sign@a + value:wrong@b") == (["value:sign", "value:wrong"], "")
    assert addresses("value:sign", ["value:"]) and addresses("no_answer:budget:x", ["no_answer:budget"])
    assert addresses("checker:wrong_func_name", ["re:func(tion)?_?name"]) and not addresses("value:sign", ["form:"])
    assert task_category(TASK) == "chain_sum" and task_category(None) == ""


def _family_task(i, family):
    return Task(id=f"{family}-{i}", env="e", split="train", prompt=f"{family} task {i}", metadata={"family": family})


def test_curator_splits_causes_by_category_and_pools_the_leftovers():
    tasks = {t.id: t for fam in ("a", "b") for t in (_family_task(i, fam) for i in range(4))}
    ts = [run("Final answer: -7", "-7", task_id="a-0"), run("Final answer: -7", "-7", task_id="a-1"),
          run("Final answer: -7", "-7", task_id="b-0"),  # one sign error in b: pooled with nothing -> dropped
          run("Final answer: 8", "8", task_id="a-2"), run("Final answer: 8", "8", task_id="b-1"),  # pooled
          run("The sum of 3 and 4 is 7.", "The sum of 3 and 4 is 7.", task_id="b-2"),
          run("The sum of 3 and 4 is 7.", "The sum of 3 and 4 is 7.", task_id="b-3"),
          run("Final answer: 7", "7", passed=True, task_id="a-3")]
    directions = OfflineCurator(2).curate(ts, H0, tasks).directions
    by_cause = {d.cause: d.task_ids for d in directions}
    assert by_cause == {"value:sign@a": ["a-0", "a-1"], "format:no_marker@b": ["b-2", "b-3"],
                        "value:off_by_one": ["a-2", "b-1"]}
    assert len({d.id for d in directions}) == 3 and all(len(d.task_ids) >= 2 for d in directions)
    # the gold answer picks the label but never leaves the curator (h7: redacted evidence, coevo.envs.redact)
    assert all("expected" not in e.diagnostics for d in directions for e in d.evidence)
    one_family = {k: v for k, v in tasks.items() if k.startswith("a")}
    assert [d.cause for d in OfflineCurator(2).curate(ts[:2], H0, one_family).directions] == ["value:sign"]
    # with three needed, no (cause, category) group suffices; the sign errors pool across categories
    assert [(d.cause, len(d.task_ids)) for d in OfflineCurator(3).curate(ts, H0, tasks).directions] == [
        ("value:sign", 3)]
