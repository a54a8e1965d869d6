"""Suite parity: when a harness changes a reply before the verifier sees it, the
score is coevo's, not the suite's; the report says so beside the score and gives the suite's own
score of the raw replies.

A transformation is a parser setting that rewrites the reply text before the answer is read (today
``strip_code_fences``: a ```json-fenced BFCL call list passes coevo's H0 and fails bfcl-eval, whose
decoder rejects a language-tagged fence). Reading the answer out of the reply by the harness's own
``final_answer_pattern`` is the harness's interface, not a transformation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coevo.envs.base import Env, Task
from coevo.models.trajectory import Trajectory

TRANSFORMS = {"strip_code_fences": "code fences stripped before scoring"}


def reply_transforms(spec: Any) -> list[str]:
    """What harness ``spec`` (a ``HarnessSpec``) does to every reply before scoring, as phrases for a
    report (``TRANSFORMS``); empty when it scores replies as written."""
    parser = getattr(spec, "parser", None)
    return [text for field, text in TRANSFORMS.items() if getattr(parser, field, False)]


def raw_reply(trajectory: Trajectory) -> str:
    """The text of the trajectory's last model message ("" when the model never replied)."""
    for message in reversed(trajectory.messages):
        if message.get("type") == "ai":
            content = (message.get("data") or {}).get("content")
            return content if isinstance(content, str) else ""
    return ""


def suite_reward(env: Env, tasks: Mapping[str, Task], trajectories: Sequence[Trajectory]) -> float | None:
    """The mean reward the suite's own evaluation gives the trajectories' raw final replies
    (``env.suite_score``, e.g. ``BfclEnv.suite_score``), in [0, 1] over rollouts; None when the env
    has no ``suite_score`` or cannot score one of the replies on its own."""
    score = getattr(env, "suite_score", None)
    if not callable(score) or not trajectories:
        return None
    rewards = []
    for traj in trajectories:
        verdict = score(tasks[traj.task_id], raw_reply(traj))
        if verdict is None:
            return None
        rewards.append(verdict.reward)
    return sum(rewards) / len(rewards)


def parity_note(reply_transforms: Sequence[str], suite_mean: float | None) -> str:
    """The sentence a report prints beside a score: "" for a harness that scores replies as written,
    else e.g. ``code fences stripped before scoring; the suite's own score of the raw replies: 0.000``
    (``not computable`` when the suite cannot score a reply alone)."""
    if not reply_transforms:
        return ""
    raw = "not computable" if suite_mean is None else f"{suite_mean:.3f}"
    return f"{'; '.join(reply_transforms)}; the suite's own score of the raw replies: {raw}"
