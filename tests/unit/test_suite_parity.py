"""Suite parity (issue 29, item 8): the reasoning-gym H0 reads the suite's own ``<answer>`` convention
(the last tag) beside its final-answer line; a harness that transforms replies before scoring says so
beside the score, with the suite's own score of the raw replies (BFCL: a ```json fence)."""

import asyncio
import io
import random
import re

import pytest
from langchain_core.messages import AIMessage

from coevo.envs.registry import get_env
from coevo.evaluation.engine import evaluate
from coevo.evaluation.parity import parity_note, reply_transforms
from coevo.harnesses.parse import parse_reply
from coevo.harnesses.spec import Parser, load_harness
from coevo.models.fake import ScriptedChatModel
from coevo.records import EvaluationRecord

OLD_PATTERN = r"(?is)final answer\s*:\s*(.+)"  # the H0 pattern before issue 29 (still Parser's default)


def _answer(parser: Parser, reply: str) -> str | None:
    return parse_reply(AIMessage(content=reply), parser).answer


def test_rg_h0_reads_the_last_answer_tag_as_reasoning_gym_does():
    env = get_env("reasoning_gym:families=chain_sum,size=20,seed=0")
    task = env.tasks("train", 1)[0]
    gold = env.reveal(task)
    wrong = str(int(gold) + 1)
    reply = f"First try: <answer>{wrong}</answer>. Checking again, the sum is <answer>{gold}</answer>"
    assert env.suite_score(task, reply).reward == 1.0  # reasoning-gym's extract_answer: the last tag
    h0 = load_harness("reasoning_gym")
    result = asyncio.run(evaluate(h0, "ck", env, "train", tasks=[task], model=ScriptedChatModel(script=[reply])))
    assert result.mean_reward == 1.0  # coevo: 1.0 now (0.0 before: the whole reply was the answer)
    old = h0.parser.model_copy(update={"final_answer_pattern": OLD_PATTERN})
    assert env.score(task, _answer(old, reply), env.episode(task)).reward == 0.0
    assert result.reply_transforms == [] and result.suite_reward is None  # H0 does not transform replies


@pytest.mark.parametrize("reply, answer", [
    ("Final answer: 7", "7"),
    ("<answer>5</answer> no, <answer>7</answer>", "7"),
    ("<answer>5</answer>\nFinal answer: 7", "7"),  # whichever convention comes later wins
    ("Final answer: 5\n<answer>7</answer> done", "7"),
    ("Final answer: <answer>7</answer>", "7"),
    ("<answer>7", "<answer>7"),  # an unclosed tag is no answer span (as in reasoning-gym): the whole reply
])
def test_rg_h0_answer_spans(reply, answer):
    assert _answer(load_harness("reasoning_gym").parser, reply) == answer


def test_without_a_closing_answer_tag_the_reading_is_unchanged():
    """The new H0 pattern reads exactly what the old one read on every reply without ``</answer>``:
    a score in the default job can change only for a reply that contains that tag."""
    new = load_harness("reasoning_gym").parser
    old = new.model_copy(update={"final_answer_pattern": OLD_PATTERN})
    pieces = ["Final answer:", "final ANSWER :", "FINAL ANSWER:", "<answer>", "</ANSWER>", "<answer", "answer>",
              "final answer", " ", "\n", "7", "-3", "12", "The sum is", "```", "so", ":", "Final answer: 4\n"]
    rng = random.Random(29)
    replies = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    assert all("</answer>" not in r for r in replies)
    assert sum(bool(re.search("(?i)final answer", r)) for r in replies) > 1000  # the marker path is exercised
    for reply in replies:
        assert _answer(new, reply) == _answer(old, reply), reply


def _text(table) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=200)
    console.print(table)
    return console.file.getvalue()


@pytest.fixture(scope="module")
def bfcl():
    pytest.importorskip("bfcl_eval")
    env = get_env("bfcl:categories=simple_python")
    task = next(t for s in ("train", "val", "test") for t in env.tasks(s) if t.metadata["bfcl_id"] == "simple_python_0")
    return env, task


def test_a_fence_stripping_harness_states_the_suites_own_score(bfcl, tmp_path):
    from coevo.cli.eval import result_table
    from coevo.report.html import _test_rows
    from coevo.storage import Archive

    env, task = bfcl
    reply = "```json\n[calculate_triangle_area(base=10, height=5)]\n```"
    h0 = load_harness("bfcl")
    assert reply_transforms(h0) == ["code fences stripped before scoring"]
    archive = Archive(tmp_path / "a.db")
    result = asyncio.run(evaluate(h0, "ck", env, "test", tasks=[task], model=ScriptedChatModel(script=[reply]),
                                  archive=archive, run_id="r1"))
    assert result.mean_reward == 1.0 and result.suite_reward == 0.0  # coevo 1.0, bfcl-eval 0 on the raw reply
    assert result.reply_transforms == ["code fences stripped before scoring"]
    assert re.search(r"suite's own, raw replies\W+0\.000\W+harness: code fences stripped before scoring",
                     _text(result_table(result)))
    (stored,) = archive.list(EvaluationRecord, run_id="r1")
    html_rows = _test_rows(None, [stored])
    assert "code fences stripped before scoring; the suite&#x27;s own score of the raw replies: 0.000" in html_rows

    as_written = h0.model_copy(update={"parser": h0.parser.model_copy(update={"strip_code_fences": False})})
    plain = asyncio.run(evaluate(as_written, "ck", env, "test", tasks=[task], model=ScriptedChatModel(script=[reply])))
    assert plain.mean_reward == 0.0 and plain.reply_transforms == [] and plain.suite_reward is None
    assert "suite's own" not in _text(result_table(plain))


def test_parity_note_text():
    assert parity_note([], 0.5) == ""
    assert parity_note(["code fences stripped before scoring"], None).endswith("raw replies: not computable")
