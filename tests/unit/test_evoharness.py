"""The evoharness_rl family end to end on fakes (issue 26): the start harness is equipped with BPE
state, each weight stage's rollouts start from the lineage's experience, and the lessons successful
rollouts saved are consolidated between stages."""

import asyncio
import json
import logging
from types import SimpleNamespace

import pytest
from harness_kit import call
from langchain_core.messages import AIMessage, ToolMessage

from coevo.app.run import run_meta
from coevo.config import RunConfig
from coevo.envs.base import Episode, Score, Task
from coevo.graphs.evoharness.nodes import consolidate, refine_progress
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import HarnessSpec, Prompt, validate_spec
from coevo.meta.context import MetaContext
from coevo.models.checkpoint import Checkpoint
from coevo.models.fake import ScriptedChatModel
from coevo.models.trajectory import Trajectory
from coevo.records import HarnessRecord, LLMCallRecord
from coevo.roles.summariser import LLMSummariser
from coevo.storage import Archive
from coevo.training.grpo.harness_cost import harness_metrics

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "sloe", "yuzu", "quince", "lemon", "grape"]
LESSON = "repeat the last word of the task"


class WordEnv:
    """Repeat-the-word tasks; train task ``w-pear`` is never solved (its lesson must not be kept)."""

    name = "words"

    def tasks(self, split, n=None):
        start = {"train": 0, "val": 4, "test": 8}[split]
        return [Task(id=f"w-{w}", env="words", split=split, prompt=f"Repeat the word: {w}")
                for w in WORDS[start:start + 4][: n or 4]]

    def episode(self, task, seed=0):
        return Episode(task=task)

    def score(self, task, answer, episode):
        ok = (answer or "").strip() == task.prompt.rsplit(" ", 1)[1]
        return Score(reward=float(ok), passed=ok)


def policy():
    """Consolidates a lesson (the word itself for ``pear``, which it then fails), then answers."""

    def reply(messages):
        word = next(str(m.content) for m in messages if "Repeat the word" in str(m.content)).rsplit(" ", 1)[1]
        if not any(isinstance(m, ToolMessage) for m in messages):
            return call("bpe_consolidate", lesson=word if word == "pear" else LESSON)
        return AIMessage(content=f"Final answer: {'banana' if word == 'pear' else word}")

    return ScriptedChatModel(script=[reply])


class ExperienceTrainer:
    """Checkpoint ``<parent>+r<round>`` and real rollouts of the incumbent, each given the stage's experience."""

    def __init__(self, env, model, archive):
        self.env, self.model, self.archive, self.given = env, model, archive, []

    async def __call__(self, checkpoint_id, spec, tasks, round, options=None):
        self.given.append((getattr(options, "rounds", 0), list(options.experience)))
        new = f"{checkpoint_id}+r{round}"
        trajs = [await arun_rollout(spec, self.model, self.env, t, checkpoint_id=new, experience=options.experience)
                 for t in tasks]
        metrics = {"reward_mean": sum(t.reward for t in trajs) / len(trajs), **harness_metrics(trajs, 0.5)}
        self.archive.put(Checkpoint(id=new, base_model="fake", parents=[checkpoint_id], metrics=metrics,
                                    run_id="run-1"))
        return new, [t.model_copy(update={"id": f"{new}-{t.task_id}"}) for t in trajs]


@pytest.mark.parametrize("sft_steps", [0, 2])
def test_evoharness_rl_equips_bpe_trains_with_experience_and_consolidates_it(tmp_path, sft_steps):
    h0 = HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.", output_format="Reply 'Final answer: X'."))
    (tmp_path / "h0.json").write_text(h0.model_dump_json())
    config = RunConfig(strategy="evoharness_rl", rounds=2, db=str(tmp_path / "run.db"),
                       harness=str(tmp_path / "h0.json"), policy="fake:words",
                       env={"ref": "words", "n_train": 4, "n_val": 4, "n_test": 4},
                       train={"action_cost": 0.5}, evoharness={"sft_steps": sft_steps})
    archive, env, model = Archive(config.db), WordEnv(), policy()
    trainer = ExperienceTrainer(env, model, archive)
    ctx = MetaContext(config=config, env=env, archive=archive, policy=lambda ckpt: model, trainer=trainer)
    state = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))

    final = ctx.spec(state["incumbent"])
    assert state["start_harness"] == h0.id and final.bpe is not None and final.parents == [h0.id]
    sft = [(sft_steps, [])] if sft_steps else []  # the SFT stage first, then one cost-aware GRPO stage a round
    assert trainer.given == [*sft, (0, []), (0, [LESSON])]  # round 1 starts from round 0's consolidated lesson
    assert [h.round for h in state["history"]] == [0, 1]
    assert state["checkpoint"] == state["start_checkpoint"] + "+r0" * (1 + bool(sft_steps)) + "+r1"
    # deduplicated; the failed rollout's lesson is not kept
    assert ctx.experience.lessons(ctx.experience_lineage(h0.id)) == [LESSON]
    round1 = [t for t in archive.list(Trajectory, run_id="run-1", split="train") if "+r1" in t.checkpoint_id]
    assert round1 and all(t.harness_state["experience"][0] == LESSON for t in round1)
    assert all(t.harness_actions[0]["action"] == "consolidate" for t in round1)
    test = state["test"]["final"]
    assert test.harness_id == final.id and len(test.per_task) == 4 and test.score == 1.0


NEAR = {"apple": LESSON, "plum": "Repeat the last word of this task", "fig": "answer with the word alone"}
"""The lesson each train task's rollout saves: plum's is a near duplicate of apple's (Jaccard 6/7)."""


def evolving_policy():
    """Saves its task's lesson (``NEAR``; pear's is the word itself), marks 'read the word' done (not
    for pear; and 'say it' for plum only), then answers (pear wrongly)."""

    def reply(messages):
        word = next(str(m.content) for m in messages if "Repeat the word" in str(m.content)).rsplit(" ", 1)[1]
        done = sum(isinstance(m, ToolMessage) for m in messages)
        steps = [call("bpe_consolidate", lesson=NEAR.get(word, word)),
                 *([call("bpe_update_progress", subgoal="Read the  word", status="done")] if word != "pear" else []),
                 *([call("bpe_update_progress", subgoal="say it", status="done")] if word == "plum" else [])]
        if done < len(steps):
            return steps[done]
        return AIMessage(content=f"Final answer: {'banana' if word == 'pear' else word}")

    return ScriptedChatModel(script=[reply])


class Tracked:
    """A tracker keeping every scalar it is sent."""

    name, folder = "memory", None

    def __init__(self):
        self.scalars = []

    def log(self, scalars, step):
        self.scalars.append((step, dict(scalars)))

    def close(self):
        pass


def evolve(tmp_path, summariser=None, rounds=2):
    h0 = HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.", output_format="Reply 'Final answer: X'."))
    (tmp_path / "h0.json").write_text(h0.model_dump_json())
    config = RunConfig(strategy="evoharness_rl", rounds=rounds, db=str(tmp_path / "run.db"),
                       harness=str(tmp_path / "h0.json"), policy="fake:words",
                       env={"ref": "words", "n_train": 4, "n_val": 4, "n_test": 4}, evoharness={"sft_steps": 0},
                       train={"action_cost": 0.0})  # lambda = 0: this test is about experience, not the cost
    archive, env, model = Archive(config.db), WordEnv(), evolving_policy()
    ctx = MetaContext(config=config, env=env, archive=archive, policy=lambda ckpt: model, summariser=summariser,
                      trainer=ExperienceTrainer(env, model, archive), tracker=Tracked())
    state = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    return ctx, state, archive, h0


def test_progress_schema_is_refined_from_successful_rollouts_and_seeds_the_next_rounds_episodes(tmp_path):
    ctx, state, archive, h0 = evolve(tmp_path)
    final = ctx.spec(state["incumbent"])
    assert final.bpe.progress_schema == ["Read the word"]  # done in 3 successful rollouts; 'say it' only in 1
    (refined,) = archive.list(HarnessRecord, run_id="run-1", origin="progress_schema")  # round 1: no change
    (bpe,) = archive.list(HarnessRecord, run_id="run-1", origin="bpe")
    assert refined.id == final.id and refined.parents == [bpe.id] and ctx.spec(bpe.id).bpe.progress_schema == []
    round1 = [t for t in archive.list(Trajectory, run_id="run-1", split="train") if "+r1" in t.checkpoint_id]
    assert round1 and all(t.harness_id == final.id for t in round1)
    pending = {t.task_id: t.harness_state["progress"]["pending"] for t in round1}
    assert pending == {"w-apple": [], "w-pear": ["Read the word"], "w-plum": [], "w-fig": []}  # seeded; pear: undone
    round0 = [t for t in archive.list(Trajectory, run_id="run-1", split="train") if "+r1" not in t.checkpoint_id]
    assert len(round0) == 4 and all(t.harness_state["progress"]["pending"] == [] for t in round0)
    assert state["test"]["final"].harness_id == final.id


def test_consolidation_merges_near_duplicate_lessons_and_tracks_offered_merged_kept(tmp_path):
    ctx, state, archive, h0 = evolve(tmp_path, rounds=1)
    # plum's wording replaced apple's
    assert ctx.experience.lessons(ctx.experience_lineage(h0.id)) == [NEAR["plum"], NEAR["fig"]]
    (scalars,) = [s for _, s in ctx.tracker.scalars if "experience/kept" in s]
    assert scalars == {"experience/offered": 3.0, "experience/merged": 1.0, "experience/kept": 2.0}


@pytest.mark.parametrize("reply, kept, source", [
    ({"lessons": ["repeat the last word of the task alone"]}, ["repeat the last word of the task alone"], "llm"),
    ({"lessons": ["always say banana"]}, [NEAR["plum"], NEAR["fig"]], "offline"),  # invented: rejected
])
def test_an_llm_summariser_consolidates_or_its_rejected_reply_falls_back_offline(tmp_path, caplog, reply, kept,
                                                                                 source):
    summariser = LLMSummariser("openai/fake", mock_response=json.dumps(reply))
    with caplog.at_level(logging.INFO, logger="coevo.loop"):
        ctx, state, archive, h0 = evolve(tmp_path, summariser, rounds=1)
    assert ctx.experience.lessons(ctx.experience_lineage(h0.id)) == kept
    assert archive.list(LLMCallRecord, run_id="run-1", role="summariser")  # the calls are stored
    assert f"merged ({source})" in caplog.text
    assert ("LLM reply rejected" in caplog.text) == (source == "offline")


def test_nothing_is_refined_without_successful_rollouts_or_a_subgoal_done_twice(tmp_path):
    archive = Archive(tmp_path / "a.db")
    spec = validate_spec({"name": "h", "bpe": {"progress_schema": ["look"]}})
    archive.add_harness(spec, [], "bpe", "run-1")
    ctx = MetaContext(config=RunConfig(strategy="evoharness_rl", train={"action_cost": 0.5}), env=WordEnv(),
                      archive=archive, policy=lambda c: None, run_id="run-1")
    trajs = [Trajectory(id=f"t{i}", task_id=f"w-{i}", passed=i != 1,
                        harness_state={"progress": {"done": ["open door"] if i else ["take key"]}}) for i in range(3)]
    archive.put(*trajs)
    state = {"incumbent": spec.id, "start_harness": spec.id, "round": 0, "train_trajectories": ["t0", "t1"]}
    runtime = SimpleNamespace(context=ctx)
    assert refine_progress(state, runtime) == {}  # t1 failed: 'open door' done in one successful rollout
    assert refine_progress({**state, "train_trajectories": []}, runtime) == {}
    out = refine_progress({**state, "train_trajectories": ["t0", "t1", "t2"]}, runtime)
    assert out == {} and ctx.spec(spec.id).bpe.progress_schema == ["look"]  # still only once: nothing
    trajs[0].harness_state = {"progress": {"done": ["Open door"]}}
    archive.put(trajs[0])
    out = refine_progress({**state, "train_trajectories": ["t0", "t2"]}, runtime)
    assert ctx.spec(out["incumbent"]).bpe.progress_schema == ["Open door"]
    assert ctx.spec(out["incumbent"]).parents == [spec.id]


def node_context(tmp_path, bpe):
    """A run context over a fresh archive holding a BPE harness (``bpe``: its settings); returns it,
    the spec and a state with that harness as incumbent and start."""
    archive = Archive(tmp_path / "a.db")
    spec = validate_spec({"name": "h", "bpe": bpe})
    archive.add_harness(spec, [], "bpe", "run-1")
    ctx = MetaContext(config=RunConfig(strategy="evoharness_rl", train={"action_cost": 0.5}), env=WordEnv(),
                      archive=archive, policy=lambda c: None, run_id="run-1")
    return ctx, spec, {"incumbent": spec.id, "start_harness": spec.id, "round": 0}


def played(ctx, *rollouts, prefix="t"):
    """Store ``(task id, passed, gold answer, harness_state)`` rollouts; returns their ids."""
    trajs = [Trajectory(id=f"{prefix}{i}", task_id=task, passed=ok, score_detail={"expected": gold},
                        harness_state=state) for i, (task, ok, gold, state) in enumerate(rollouts)]
    ctx.archive.put(*trajs)
    return [t.id for t in trajs]


def test_the_schema_counts_tasks_not_rollouts_never_carries_a_gold_answer_and_fits_max_chars(tmp_path):
    ctx, spec, state = node_context(tmp_path, {"max_chars": 20})
    done = lambda *s: {"progress": {"done": list(s)}}  # noqa: E731
    ids = played(ctx, ("w-a", True, "42", done("say 42", "read the task")), ("w-a", True, "42", done("say 42")),
                 ("w-b", True, "7", done("read the task", "the answer is 42", "look under every single mat")),
                 ("w-c", True, "9", done("The answer is 42", "look under every single mat")),
                 ("w-d", False, "lemon", done("say lemon")), ("w-e", True, "5", done("say lemon")))
    out = refine_progress({**state, "train_trajectories": ids}, SimpleNamespace(context=ctx))
    # 'say 42': one task's group; 'the answer is 42': w-a's gold, which w-a would then be trained with;
    # 'say lemon': done by one successful task only, and a failed task's gold; the long one: cut to max_chars
    assert ctx.spec(out["incumbent"]).bpe.progress_schema == ["read the task", "look under every sin"]
    again = refine_progress({**state, "train_trajectories": ids}, SimpleNamespace(context=ctx))  # a resumed node
    assert again == out and len(ctx.archive.list(HarnessRecord, origin="progress_schema")) == 1
    reordered = played(ctx, ("w-a", True, "1", done("LOOK under every sin", "read the task")),
                       ("w-b", True, "2", done("look under every  sin", "Read The Task")), prefix="r")
    assert refine_progress({**state, "incumbent": out["incumbent"], "train_trajectories": reordered},
                           SimpleNamespace(context=ctx)) == {}  # the same schema in another order and case


def test_consolidation_never_keeps_a_lesson_holding_a_train_gold_answer(tmp_path):
    ctx, spec, state = node_context(tmp_path, {})
    lessons = lambda *s: {"consolidated": list(s)}  # noqa: E731
    ctx.experience.consolidate(ctx.experience_lineage(spec.id), ["the answer to the fig task is 42"],
                               cap=16)  # kept before this round
    ids = played(ctx, ("w-a", True, "42", lessons("answer 42", "read the task twice")),
                 ("w-b", True, "Paris", lessons("the capital asked is paris")),
                 ("w-c", False, "7", lessons("it is 7")))
    assert consolidate({**state, "train_trajectories": ids}, SimpleNamespace(context=ctx)) == {}
    assert ctx.experience.lessons(ctx.experience_lineage(spec.id)) == ["read the task twice"]


class WalkthroughEnv(WordEnv):
    """``WordEnv`` whose gold answers the loop can read (``reveal``): train task ``w-apple``'s is a command
    list, as TextWorld's walkthroughs are; the others are their word."""

    def reveal(self, task):
        return ["go north", "take key"] if task.id == "w-apple" else task.prompt.rsplit(" ", 1)[1]


def test_lessons_and_schema_entries_are_sealed_as_every_edit_is(tmp_path):
    """Against every train task's gold (not only this round's), in any case, spacing or punctuation,
    and a command list's commands in order: what the sealing module checks an editor's text with."""
    ctx, spec, state = node_context(tmp_path, {})
    ctx.env = WalkthroughEnv()
    lessons = lambda *s: {"consolidated": list(s)}  # noqa: E731
    ids = played(ctx, ("w-b", True, "7", lessons("Go North, take key!", "read the task twice")),
                 ("w-c", True, "9", lessons("the fruit was PEAR.", "look before you act")))
    assert consolidate({**state, "train_trajectories": ids}, SimpleNamespace(context=ctx)) == {}
    assert ctx.experience.lessons(ctx.experience_lineage(spec.id)) == ["read the task twice", "look before you act"]

    done = lambda *s: {"progress": {"done": list(s)}}  # noqa: E731
    ids = played(ctx, ("w-b", True, "7", done("go north; take key", "open the door")),
                 ("w-c", True, "9", done("GO  NORTH take-key", "open the door")), prefix="p")
    out = refine_progress({**state, "train_trajectories": ids}, SimpleNamespace(context=ctx))
    assert ctx.spec(out["incumbent"]).bpe.progress_schema == ["open the door"]


def test_experience_is_kept_per_env_config_and_sealed_against_the_evaluated_split(tmp_path):
    """A lesson learned on one env config never reaches a run on another (whose test tasks may be the
    first one's train tasks), and a val or test rollout starts without any lesson holding the answer of
    a task of that split."""
    from coevo.harnesses.bpe import ArchiveExperience

    ctx, spec, state = node_context(tmp_path, {})
    ctx.env, ctx.experience = WalkthroughEnv(), ArchiveExperience(ctx.archive, "run-1")
    ctx.experience.consolidate(ctx.experience_lineage(spec.id), ["the word is kiwi", "read the task twice"], cap=8)
    other = MetaContext(config=ctx.config.model_copy(update={"env": ctx.config.env.model_copy(update={"n_val": 2})}),
                        env=ctx.env, archive=ctx.archive, policy=lambda c: None, run_id="run-2",
                        experience=ArchiveExperience(ctx.archive, "run-2"))
    assert other.experience_lineage(spec.id) != ctx.experience_lineage(spec.id)
    assert other.lessons_for(spec.id, "train", other.tasks("train")) == []  # another config: nothing shared
    train, val = ctx.tasks("train"), ctx.tasks("val")  # w-kiwi is a val task of this config
    assert ctx.lessons_for(spec.id, "train", train) == ["the word is kiwi", "read the task twice"]
    assert ctx.lessons_for(spec.id, "val", val) == ["read the task twice"]
    assert ctx.lessons_for(spec.id, "test", ctx.tasks("test")) == ["the word is kiwi", "read the task twice"]
