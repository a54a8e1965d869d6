"""Sealing (issue 22, item 12): no gold answer reaches a meta role outside a demonstration it builds;
a task whose answer any live harness carries — any length, any formatting — leaves later weight
stages, checks and search scoring, whichever role wrote it (scripted LLM editor and proposer that
copy answers); a gate-rejected candidate's tasks return to the train set."""

from __future__ import annotations

import asyncio
import json
import re

from langchain_core.messages import AIMessage
from test_meta_loop import FakeTrainer, _run, setup_run
from test_whale import PhaseTrainer

from coevo.app.run import run_meta
from coevo.config import RunConfig
from coevo.envs.base import Episode, Score, Task
from coevo.harnesses.spec import HarnessSpec, Prompt
from coevo.meta.context import MetaContext
from coevo.meta.sealing import answer_tokens, demonstrated, sealed_tasks
from coevo.models.fake import ScriptedChatModel
from coevo.records import EditRecord, EvaluationRecord, Trajectory
from coevo.roles.curator import LLMCurator, OfflineCurator
from coevo.roles.editor import LLMEditor
from coevo.roles.proposer import LLMProposer
from coevo.storage import Archive

RULE = {"op": "add", "path": "/prompt/rules/sums", "value": {"slot": "system", "text": "Add the two numbers."}}


def test_answers_match_at_any_length_and_formatting_but_never_in_h0_or_lineage():
    assert answer_tokens("[g(a=1)]") == answer_tokens("g (a = 1)") == ["g", "a", "1"]
    assert answer_tokens("Final answer: 07.0, -3 and VALUE-x") == ["final", "answer", "7", "-3", "and", "value", "x"]
    start = HarnessSpec(prompt=Prompt(system="Count to 9."))
    answers = {"short": "7", "call": "[g(a=1)]", "nine": "9", "two": "12", "word": "Apple Pie"}
    spec = HarnessSpec.model_validate({
        **start.model_dump(mode="json"),
        "parents": ["7" * 64],  # lineage is not content
        "skills": {"d": {"kind": "demonstration", "input": "q", "output": "g (a = 1)"}},
        "prompt": {**start.prompt.model_dump(mode="json"),
                   "rules": {"r": {"slot": "system", "text": "7.0 or apple  pie"}}}})
    assert demonstrated(spec, answers, start) == ["short", "call", "word"]  # "9": H0's own text
    assert demonstrated(start, answers, start) == []


class SumEnv:
    """``Add a and b.``: gold ``a + b`` (one or two characters); a miss reports ``wrong_sum``."""

    name = "sums"
    PAIRS = {"train": [(3, 4), (5, 7), (2, 2), (6, 3), (8, 8), (1, 5), (9, 9), (2, 9)],
             "val": [(1, 1), (4, 4), (7, 7), (2, 3)], "test": [(6, 6), (1, 2), (3, 3), (5, 5)]}

    def tasks(self, split, n=None):
        return [Task(id=f"s-{a}-{b}", env=self.name, split=split, prompt=f"Add {a} and {b}.")
                for a, b in self.PAIRS[split][:n]]

    def episode(self, task, seed=0):
        return Episode(task=task)

    def reveal(self, task):
        a, b = map(int, re.findall(r"\d+", task.prompt))
        return str(a + b)

    def score(self, task, answer, episode):
        ok = (answer or "").strip() == self.reveal(task)
        return Score(reward=float(ok), passed=ok,
                     detail={} if ok else {"expected": self.reveal(task), "public": {"error_type": "wrong_sum"}})


def adder():
    """Right iff the system prompt tells it to add the two numbers."""

    def reply(messages):
        a, b = map(int, re.findall(r"\d+", str(messages[-1].content)))
        right = "Add the two numbers" in str(messages[0].content)
        return AIMessage(content=f"Final answer: {a + b if right else 'banana'}")

    return ScriptedChatModel(script=[reply])


def sum_run(tmp_path, strategy="vace", editor=None, proposer=None, trainer=None, **config):
    h0 = HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.", output_format="Reply 'Final answer: X'."))
    (tmp_path / "h0.json").write_text(h0.model_dump_json())
    cfg = RunConfig(strategy=strategy, rounds=2, db=str(tmp_path / "run.db"), harness=str(tmp_path / "h0.json"),
                    policy="fake:sums", env={"ref": "sums", "n_train": 6, "n_val": 4, "n_test": 4},
                    meta={"smoke_tasks": 2, "local_check": True, "local_tasks": 6, "local_controls": 0}, **config)
    archive, env, model = Archive(cfg.db), SumEnv(), adder()
    ctx = MetaContext(config=cfg, env=env, archive=archive, policy=lambda c: model, run_id="run-1",
                      trainer=trainer(archive) if trainer else FakeTrainer(env, model, archive),
                      curator=OfflineCurator(2), editor=editor, proposer=proposer)
    return asyncio.run(run_meta(cfg, run_id="run-1", context=ctx, archive=archive)), ctx, archive


def test_an_llm_editor_copying_short_and_reformatted_answers_seals_those_tasks(tmp_path):
    copied = "Add the two numbers. Examples: 3 and 4 give 7.0; 5 and 7 give 12.0."  # gold "7" and "12"
    reply = json.dumps({"rationale": "show the sums", "patch": [{**RULE, "value": {"slot": "system", "text": copied}}]})
    state, ctx, archive = sum_run(tmp_path, editor=LLMEditor(ScriptedChatModel(script=[reply])))
    (decision,) = state["decisions"]
    assert decision.accepted and state["incumbent"] == decision.candidate_id
    sealed = sealed_tasks(state)
    assert {"s-3-4", "s-5-7", "s-2-2"} == sealed  # 7, 12, and 4 (a token of the example) all appear
    (_, first, _), (_, second, _) = ctx.trainer.stages
    assert sealed <= set(first) and not sealed & set(second)  # they leave the next weight stage
    checks = [e for e in archive.list(EvaluationRecord, run_id="run-1") if e.split == "train"]
    assert checks and all(not sealed & set(e.task_ids) for e in checks)  # and every check of the candidate


def test_an_llm_proposer_copying_answers_seals_them_from_rsft_and_from_search_scoring(tmp_path):
    def propose(messages):
        parent = re.search(r'"id": "([0-9a-f]{12})"', str(messages[-1].content)).group(1)
        text = "Add the two numbers. Answers: 16, 6, 18."  # two weight-phase tasks and a search task
        return json.dumps({"candidates": [{"parent": parent, "rationale": "copy",
                                           "patch": [{**RULE, "value": {"slot": "system", "text": text}}]}]})

    proposer = LLMProposer(ScriptedChatModel(script=[propose]))
    state, ctx, archive = sum_run(tmp_path, "whale", proposer=proposer, train={"tasks_per_step": 1},
                                  trainer=lambda archive: PhaseTrainer(archive, 1, [0.5]),
                                  whale={"weight_epochs": 1.0, "search_iterations": 1}, search={"tasks": 2})
    assert sealed_tasks(state) == {"s-8-8", "s-1-5", "s-9-9"}
    first, second = ctx.trainer.phases
    assert {"s-8-8", "s-1-5"} <= set(first) and not {"s-8-8", "s-1-5"} & set(second)  # RSFT never trains on them
    scores = [s.score for s in state["search_iterations"]]
    assert scores and all(s == 1.0 for s in scores)  # the search split scored without s-9-9: s-2-9 alone
    shown = [str(m.content) for call in proposer.chat.calls for m in call]
    assert shown and not any(re.search(r"\b11\b", text) for text in shown)  # s-2-9's gold never shown to it


def test_a_gate_rejected_candidates_demonstration_tasks_return_to_the_train_set(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "regress")
    config.meta.local_check = False  # the regressing candidate reaches the gate and is rejected there
    state = asyncio.run(_run(config, ctx, archive))
    # round 0's two samples (the rule and demonstrations, test_meta_loop.EDIT_OPERATORS) both reach the gate
    rejected = {d.candidate_id for d in state["decisions"] if not d.accepted and d.round == 0}
    demos = {f"w-{op['value']['input'].rsplit(' ', 1)[1]}" for e in archive.list(EditRecord, run_id="run-1")
             if e.child_id in rejected for op in e.patch if op["path"].startswith("/skills/")}
    assert demos and not sealed_tasks(state)  # nothing live answers a train task
    (_, first, _), (_, second, _) = ctx.trainer.stages
    assert demos <= set(second) and set(second) == set(first)  # round 1 trains on them again


class ReverseEnv(SumEnv):
    """``Reverse the word: apple``: gold ``elppa`` (never in any prompt)."""

    name = "reverse"
    WORDS = {"train": ["apple", "pear", "plum", "fig"], "val": ["kiwi", "lime"], "test": ["date", "sloe"]}

    def tasks(self, split, n=None):
        return [Task(id=f"r-{w}", env=self.name, split=split, prompt=f"Reverse the word: {w}")
                for w in self.WORDS[split][:n]]

    def reveal(self, task):
        return task.prompt.rsplit(" ", 1)[1][::-1]


def test_no_gold_answer_reaches_an_llm_curator_or_editor(tmp_path):
    env = ReverseEnv()
    gold = {env.reveal(t) for split in ("train", "val", "test") for t in env.tasks(split)}
    directions = json.dumps({"directions": [{"cause": "wrong word", "description": "d",
                                             "task_ids": ["r-apple", "r-pear", "r-plum", "r-fig"]}]})
    fix = json.dumps({"rationale": "r", "patch": [{"op": "replace", "path": "/prompt/system", "value": "Be exact."}]})
    curator, editor = LLMCurator(ScriptedChatModel(script=[directions])), LLMEditor(ScriptedChatModel(script=[fix]))
    config, ctx, archive = setup_run(tmp_path, "help", curator=curator, editor=editor)
    config.env.n_val, config.env.n_test = 2, 2
    ctx.env = env
    ctx.trainer = FakeTrainer(env, ctx.policy("w0"), archive)
    asyncio.run(_run(config, ctx, archive))
    seen = [str(m.content) for role in (curator, editor) for call in role.chat.calls for m in call]
    assert seen and all(g not in text for g in gold for text in seen)
    failures = [t for t in archive.list(Trajectory, run_id="run-1", split="train") if not t.passed]
    assert failures and all(t.score_detail.get("expected") in gold for t in failures)  # the archive keeps them


def test_the_tool_and_constraint_operators_carry_no_task_content_and_no_gold_answer():
    """``tool_expose``, ``decoding_constrain`` and ``demo_quote_evidence`` (issue 38): fed train tasks whose
    answers they could read, their children carry no task's prompt and no task's answer (any split) beyond
    H0's own text, so nothing is sealed and nothing leaks."""
    import random

    from coevo.harnesses.patch import apply_patch
    from coevo.meta.state import Direction, Evidence
    from coevo.roles.operators import OPERATORS, Material

    env = SumEnv()
    every = [t for split in ("train", "val", "test") for t in env.tasks(split)]
    answers = {t.id: env.reveal(t) for t in every}
    demo = {"kind": "demonstration", "input": "Sums: a 40, b 42. What is b?", "output": "Final answer: 42"}  # H0's own
    start = HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.", output_format="Reply 'Final answer: X'."),
                        tool_view={"exposed": []}, skills={"demo": demo})
    train = {t.id: t for t in env.tasks("train")}
    evidence = [Evidence(task_id=i, answer="0", diagnostics={"expected": answers[i]}) for i in train]
    for name, kind in (("tool_expose", "value:wrong"), ("decoding_constrain", "format:no_marker"),
                       ("demo_quote_evidence", "value:operand")):
        m = Material(Direction(id="d", cause=kind, description="", task_ids=list(train), evidence=evidence), start,
                     train, demo_answer=lambda task, _: answers[task.id], env_tools=("calculator",))
        for seed in range(4):
            edit = OPERATORS[name].make(m, random.Random(seed))
            child = apply_patch(start, edit.ops)
            text = child.canonical_json()
            assert not edit.demo_tasks and not any(t.prompt in text for t in every), (name, edit.ops)
            assert demonstrated(child, answers, start) == [], (name, edit.ops)
