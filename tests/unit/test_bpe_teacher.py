"""The scripted harness teacher (issue 26 item 2): it plays a train task with the BPE actions used
correctly (read experience, progress pending, env commands with belief updates, progress done,
consolidate, answer), in the harness's parser format; its rollouts give supervised harness
fine-tuning rows whose loss covers only the policy tokens of the BPE-using turns (tool observations,
harness injections and the env-command turns masked out)."""

import asyncio

import pytest
from harness_kit import ToyEnv, make_task

from coevo.envs.base import Episode, Score, Task, Tool
from coevo.harnesses.spec import validate_spec
from coevo.models.fake import char_tokens, fake_template
from coevo.training.evoharness.teacher import demonstration, reply_text, schedule, teacher_rollout
from coevo.training.grpo.harness_cost import bpe_turns, harness_sft_rows
from coevo.training.grpo.rollout import with_experience


class DoorGame:
    """A two-command game: ``open door`` then ``go north`` wins; the answer text plays no part."""

    name = "doors"

    def __init__(self) -> None:
        self.task = Task(id="door-1", env=self.name, split="train", prompt="Leave the room to the north.")

    def tasks(self, split: str = "train", n: int | None = None) -> list[Task]:
        return [self.task][:n]

    def walkthrough(self, task: Task):
        return [("act", {"command": "open door"}), ("act", {"command": "go north"})], "done"

    def episode(self, task: Task, seed: int = 0) -> Episode:
        state = {"open": False, "won": False}

        def act(command: str) -> str:
            if command == "open door":
                state["open"] = True
                return "You open the wooden door.\nA draught comes in."
            if command == "go north" and state["open"]:
                state["won"] = True
                return "You step outside. You won!"
            return "Nothing happens."

        tool = Tool("act", "Type a command.", {"type": "object", "properties": {"command": {"type": "string"}},
                                               "required": ["command"]}, act)
        return Episode(task=task, tools=[tool], state=state)

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        won = episode.state["won"]
        return Score(reward=float(won), passed=won)


def char_policy_tokens(policy):
    """The fake tokenisation (one id per character) in place of a policy engine's."""
    return lambda messages, tools, reply: (char_tokens(fake_template(messages)), char_tokens(reply))


def teach(spec, env, task, lessons=()):
    run = teacher_rollout(with_experience(lessons), tokens_of=char_policy_tokens)
    return asyncio.run(run(spec, None, env, task, seed=0))


@pytest.mark.parametrize("mode", ["native", "json", "python_call"])
def test_the_teacher_plays_the_walkthrough_with_every_bpe_action_and_wins(mode):
    spec = validate_spec({"bpe": {}, "parser": {"mode": mode}})
    env = DoorGame()
    traj = teach(spec, env, env.task, lessons=["doors open before you go through"])
    assert traj.passed and traj.stop_reason == "final_answer" and traj.final_answer == "done"
    assert [a["action"] for a in traj.harness_actions] == [
        "read", "update_progress", "update_belief", "update_belief", "update_progress", "consolidate"]
    assert all(not a["error"] for a in traj.harness_actions) and traj.env_actions == 2
    state = traj.harness_state
    assert state["progress"] == {"done": ["answer the task"], "pending": []}
    assert state["belief"] == ["after open door: You open the wooden door.",
                               "after go north: You step outside. You won!"]
    assert state["experience"][0] == "doors open before you go through" and state["consolidated"]
    # the read showed the lineage's lesson to the teacher's next turn
    assert "doors open before you go through" in str(traj.messages)


def test_the_sft_rows_of_a_teacher_rollout_hold_only_its_bpe_turns_policy_tokens():
    spec, env = validate_spec({"bpe": {}, "parser": {"mode": "json"}}), DoorGame()
    traj = teach(spec, env, env.task, lessons=["a lesson"])
    assert bpe_turns(traj) == {1, 2, 4, 6, 7, 8}  # turns 3 and 5 are env commands, 9 the answer
    rows = harness_sft_rows(traj)
    trained = "".join(chr(t) for r in rows for t, m in zip(r.completion_ids, r.env_mask) if m)
    bpe_replies = [str(m["data"]["content"]) for m in traj.messages if m["type"] == "ai"]
    expected = "".join(bpe_replies[i - 1] for i in sorted(bpe_turns(traj)))
    assert trained == expected
    # tool observations (the env's, the BPE actions' replies, the read's rendering), harness-injected
    # text and the env-command and answer turns all carry no loss
    for masked in ("A draught comes in", "output]", "belief updated", "subgoal marked", "lesson saved",
                   "Experience:", "- a lesson", '"tool": "act"', "final_answer", "Leave the room"):
        assert masked not in trained
    assert '"tool": "bpe_consolidate"' in trained and sum(r.policy_tokens for r in rows) == len(expected)


def test_the_teacher_answers_an_answer_only_env_with_its_gold_in_the_parser_format():
    class Gold(ToyEnv):
        def reveal(self, task):
            return "42"

    spec = validate_spec({"bpe": {}})
    traj = teach(spec, Gold(), make_task())
    assert traj.passed and traj.calls[0].output["data"]["tool_calls"]  # native: real tool calls
    assert [a["action"] for a in traj.harness_actions] == ["read", "update_progress", "update_belief",
                                                           "update_progress", "consolidate"]
    assert traj.harness_state["belief"] == ["the answer is 42"]
    assert reply_text("native", ("bpe_read", {"part": "all"}), False) == (
        '<tool_call>{"name": "bpe_read", "arguments": {"part": "all"}}</tool_call>')


def test_the_teacher_refuses_val_and_test_tasks_and_fits_the_call_budget():
    env = DoorGame()
    with pytest.raises(ValueError, match="train tasks only"):
        demonstration(env, Task(id="v", env="doors", split="val", prompt="Leave the room to the north."))
    with pytest.raises(TypeError, match="walkthrough"):
        demonstration(type("NoGold", (), {"name": "x"})(), env.task)
    demo = demonstration(env, env.task)
    assert len(schedule(demo, 9)) == 9 and schedule(demo, 9).count(None) == 2
    assert schedule(demo, 8).count(None) == 1 and schedule(demo, 7).count(None) == 0
    with pytest.raises(ValueError, match="max_model_calls"):
        schedule(demo, 6)


def test_a_harness_sft_stage_trains_on_the_teachers_bpe_turns_tokenised_by_the_policys_engine(tmp_path):
    """The real path: ``train_rsft`` with the live tiny policy; the teacher plays every rollout, its
    replies tokenised by the policy engine's chat template and tokenizer (eos-terminated), and the
    round trains on the BPE-using turns only."""
    from training_kit import tiny_chat_checkpoint

    from coevo.training.rsft import train_rsft

    spec, env = validate_spec({"bpe": {}, "parser": {"mode": "json"}}), DoorGame()
    cfg = {"steps": 1, "tasks_per_step": 1, "num_generations": 2, "output_dir": str(tmp_path / "runs")}
    new, trajs = train_rsft(tiny_chat_checkpoint(tmp_path / "base"), spec, env, env.tasks(), cfg,
                            rollout_fn=teacher_rollout(), rows_fn=harness_sft_rows)
    assert len(trajs) == 2 and all(t.passed and t.harness_writes == 5 for t in trajs)
    first = trajs[0].calls[0]
    assert first.completion_token_ids[-1] == 3 and "".join(map(chr, first.completion_token_ids[:-1])) == (
        '{"tool": "bpe_read", "arguments": {"part": "experience"}}')  # the char tokenizer's eos is id 3
    assert "".join(map(chr, first.prompt_token_ids)).endswith("assistant: ")  # the policy's own template
    bpe_tokens = sum(len(trajs[0].calls[i - 1].completion_token_ids) for i in bpe_turns(trajs[0]))
    history = new.metrics["history"][0]
    assert history["kept"] == 2 and history["tokens"] == 2 * bpe_tokens and new.metrics["loss"] is not None
