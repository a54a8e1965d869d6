"""``Trajectory.segments``: the policy-token loss mask of a harness run (Harness-S §7, Eq. 15)."""

from __future__ import annotations

from harness_kit import call, make_task, run

from coevo.harnesses import load_harness
from coevo.harnesses.runtime import to_trajectory
from coevo.models.trajectory import ModelCall, Segment, Trajectory

WARN = {"w": {"event": "after_tool", "condition": "always", "action": "warn", "message": "HOOK-TEXT"}}


def trajectory(spec: dict, script: list) -> Trajectory:
    r = run(spec, script, with_tokens=True)
    return to_trajectory(r.state, make_task(), load_harness(spec))


def text(ids: list[int]) -> str:
    return "".join(chr(i) for i in ids)


def masked(seg: Segment, value: int) -> str:
    return text([t for t, m in zip(seg.input_ids, seg.loss_mask) if m == value])


def test_the_loss_mask_covers_exactly_the_completion_tokens():
    traj = trajectory({"hooks": WARN}, [call("lookup", content="CALLING", key="k"), "Final answer: 42"])
    (seg,) = traj.segments()
    assert len(seg.input_ids) == len(seg.loss_mask) == len(seg.logprobs)
    assert masked(seg, 1) == "CALLING" + "Final answer: 42"
    assert seg.policy_tokens == len("CALLING") + len("Final answer: 42")
    unmasked = masked(seg, 0)
    assert "value of k" in unmasked and "HOOK-TEXT" in unmasked, "observations and injections carry no loss"
    assert "Find the magic number." in unmasked
    assert all((lp == -0.5) == (m == 1) for lp, m in zip(seg.logprobs, seg.loss_mask))
    last = traj.calls[-1]
    assert seg.input_ids == last.prompt_token_ids + last.completion_token_ids


def test_observation_and_hook_tokens_sit_between_the_two_completions():
    traj = trajectory({"hooks": WARN}, [call("lookup", content="CALLING", key="k"), "Final answer: 42"])
    (seg,) = traj.segments()
    full = text(seg.input_ids)
    for span in ("value of k", "HOOK-TEXT"):
        start = full.index(span)
        assert seg.loss_mask[start:start + len(span)] == [0] * len(span)
    start = full.index("Final answer: 42")
    assert seg.loss_mask[start:start + 16] == [1] * 16 and seg.loss_mask[start - 1] == 0


def test_a_history_window_that_rewrites_the_context_starts_a_new_segment():
    script = [call("echo", content="C1", text="first"), call("echo", content="C2", text="second"), "Final answer: 1"]
    traj = trajectory({"context": {"history_turns": 1}}, script)
    segs = traj.segments()
    assert len(segs) == 2
    assert [masked(s, 1) for s in segs] == ["C1C2", "Final answer: 1"]
    assert "first" in text(segs[0].input_ids) and "first" not in text(segs[1].input_ids)
    assert sum(s.policy_tokens for s in segs) == sum(len(c.completion_token_ids) for c in traj.calls)


def test_without_a_window_the_same_run_is_one_segment():
    script = [call("echo", content="C1", text="first"), call("echo", content="C2", text="second"), "Final answer: 1"]
    assert len(trajectory({}, script).segments()) == 1


def test_calls_without_token_ids_give_no_segments():
    r = run({}, ["Final answer: 1"])
    traj = to_trajectory(r.state, make_task(), load_harness({}))
    assert traj.calls and traj.calls[0].prompt_token_ids is None and traj.segments() == []


def test_missing_logprobs_default_to_zero_and_a_non_prefix_prompt_splits():
    calls = [ModelCall(input=[], output={}, prompt_token_ids=[1, 2], completion_token_ids=[3]),
             ModelCall(input=[], output={}, prompt_token_ids=[1, 2, 3, 4], completion_token_ids=[5, 6],
                       logprobs=[-1.0, -2.0]),
             ModelCall(input=[], output={}, prompt_token_ids=[9], completion_token_ids=[7])]
    segs = Trajectory(task_id="t", calls=calls).segments()
    assert [(s.input_ids, s.loss_mask, s.logprobs) for s in segs] == [
        ([1, 2, 3, 4, 5, 6], [0, 0, 1, 0, 1, 1], [0.0, 0.0, 0.0, 0.0, -1.0, -2.0]),
        ([9, 7], [0, 1], [0.0, 0.0]),
    ]
