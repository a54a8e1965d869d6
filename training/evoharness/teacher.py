"""A scripted harness teacher: demonstrations that use the BPE harness actions correctly, for
EvoHarness-RL's supervised harness fine-tuning.

Source: EvoHarness-RL ("Learning Runtime Harness Coordination for Self-Evolving Agents", arXiv:2608.05446), abstract:
"supervised harness fine-tuning teaches the base agent the harness action space and how to
construct useful external state" before cost-aware GRPO. A small policy (SmolLM2-135M) never calls
the BPE actions on its own (0 actions in 26 rollouts, measured), so RSFT on its own accepted
rollouts has no BPE-using turn to train on. The teacher plays the env instead, with a fixed
schedule the abstract's action space implies (coevo's choice; the paper gives no schedule)::

    bpe_read(part="experience")                      # the lineage's lessons
    bpe_update_progress(subgoal=GOAL, status="pending")
    for each env command c of the demonstration:
        c                                            # the env tool call
        bpe_update_belief(hypothesis="after c: <first line of the reply>")
    (an answer-only env, no command: bpe_update_belief(hypothesis="the answer is A"))
    bpe_update_progress(subgoal=GOAL, status="done")
    bpe_consolidate(lesson=LESSON)
    the final answer

Belief updates are dropped from the end when the schedule would not fit the harness's
``budget.max_model_calls``. The demonstration is the env's own solution of a *train* task
(``Env.reveal``: a TextWorld walkthrough, or the gold answer), so it is the usual SFT
demonstration: the teacher refuses val and test tasks, which no demonstration may reach. Each
reply is written in the harness's parser format (native ``<tool_call>`` blocks, a json action
object or a python call) and tokenised with the policy's own chat template and tokenizer
(``policy.engine``), so the rows train exactly the tokens the policy would have to produce;
``coevo.training.grpo.harness_cost.harness_sft_rows`` then keeps the BPE-using turns only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field

from coevo.envs.base import Env, Task
from coevo.models.base import TOKENS_KEY
from coevo.models.messages import parse_tool_calls, text_of, tool_schema
from coevo.models.trajectory import Trajectory
from coevo.training.grpo.masking import RolloutFn

Tokens = Callable[[Sequence[BaseMessage], list[dict] | None, str], tuple[list[int], list[int]]]
"""``tokens(messages, tool schemas, reply) -> (prompt ids, completion ids)``: how the policy would
render the prompt and tokenise the reply."""

GOAL = {"textworld": "win the game"}
LESSON = {"textworld": "Act one command at a time toward the goal; note what each room holds and mark "
                       "subgoals done as you go."}
DEFAULT_GOAL = "answer the task"
DEFAULT_LESSON = "Work the task out step by step, then give the answer in the asked format."


@dataclass(frozen=True)
class Demonstration:
    """What the teacher plays on one train task: ``commands`` (env tool name, arguments) in order,
    then ``answer``; ``goal`` is the progress subgoal and ``lesson`` the experience it saves."""

    goal: str
    commands: tuple[tuple[str, dict[str, Any]], ...]
    answer: str
    lesson: str


def demonstration(env: Env, task: Task) -> Demonstration:
    """The env's own solution of train ``task`` as a ``Demonstration``: an env with
    ``walkthrough(task) -> (tool calls, answer)`` (``textworld``: the winning commands as ``act``
    calls) gives those; any other env no command and its gold answer (``env.reveal``). Raises
    ``ValueError`` for a task not in the train split (a demonstration must never reach a task it is
    scored on) and ``TypeError`` for an env with neither method."""
    if task.split != "train":
        raise ValueError(f"the harness teacher demonstrates train tasks only; task {task.id} is in {task.split!r}")
    goal, lesson = GOAL.get(env.name, DEFAULT_GOAL), LESSON.get(env.name, DEFAULT_LESSON)
    walkthrough = getattr(env, "walkthrough", None)
    if walkthrough is not None:
        calls, answer = walkthrough(task)
        return Demonstration(goal, tuple((name, dict(args)) for name, args in calls), str(answer), lesson)
    require_teachable(env)
    return Demonstration(goal, (), str(env.reveal(task)), lesson)  # type: ignore[attr-defined]


def require_teachable(env: Env) -> None:
    """Raise ``TypeError`` naming the fix when ``env`` has neither ``walkthrough(task)`` nor
    ``reveal(task)``: the teacher has no solution to demonstrate."""
    if getattr(env, "walkthrough", None) is None and getattr(env, "reveal", None) is None:
        raise TypeError(f"env {env.name!r} has neither walkthrough(task) nor reveal(task): the harness teacher "
                        "needs its solution of a train task; set evoharness.teacher = false for it")


Step = tuple[str, dict[str, Any]] | str
"""A scheduled reply: an action (shown tool name, arguments) or the final answer text."""


def schedule(demo: Demonstration, max_calls: int) -> list[Step | None]:
    """The teacher's replies in order (module doc); ``None`` marks a belief update written from the
    previous env reply at run time. Belief updates are dropped from the end to fit ``max_calls``;
    raises ``ValueError`` when even the schedule without them does not fit."""
    steps: list[Step | None] = [("bpe_read", {"part": "experience"}),
                                ("bpe_update_progress", {"subgoal": demo.goal, "status": "pending"})]
    for command in demo.commands:
        steps += [command, None]
    if not demo.commands:  # an answer-only env: the belief is the answer worked out
        steps.append(("bpe_update_belief", {"hypothesis": f"the answer is {demo.answer}"}))
    steps += [("bpe_update_progress", {"subgoal": demo.goal, "status": "done"}),
              ("bpe_consolidate", {"lesson": demo.lesson}), demo.answer]
    while len(steps) > max_calls and None in steps:
        steps.pop(len(steps) - 1 - steps[::-1].index(None))
    if len(steps) > max_calls:
        raise ValueError(f"the teacher's demonstration needs {len(steps)} model calls; the harness allows "
                         f"{max_calls} (budget.max_model_calls): raise it or pick shorter tasks")
    return steps


def reply_text(mode: str, step: Step, answer_json: bool) -> str:
    """One scheduled ``step`` written in parser ``mode``'s format: an action as a native
    ``<tool_call>`` block, a json ``{"tool", "arguments"}`` object or a python call; the final
    answer as ``{"final_answer": ...}`` when ``answer_json`` else ``Final answer: ...``. Raises
    ``ValueError`` for an action in ``text`` mode (no actions there)."""
    if isinstance(step, str):
        return json.dumps({"final_answer": step}) if answer_json else f"Final answer: {step}"
    name, args = step
    if mode == "native":
        return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"
    if mode == "json":
        return json.dumps({"tool": name, "arguments": args})
    if mode == "python_call":
        return f"[{name}(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in args.items()) + ")]"
    raise ValueError(f"parser mode {mode!r} takes no actions: the harness teacher needs native, json or python_call")


def belief_from(messages: Sequence[BaseMessage], command: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A belief update written from the last message (the env's reply to ``command``): its first
    non-empty line after any ``[tool output]`` header."""
    lines = [ln.strip() for ln in text_of(messages[-1].content).splitlines() if ln.strip()] if messages else []
    lines = [ln for ln in lines if not (ln.startswith("[") and ln.endswith("output]"))]
    seen = lines[0][:100] if lines else "nothing new"
    what = next(iter(command.values()), "") if command else ""
    return "bpe_update_belief", {"hypothesis": f"after {what}: {seen}"}


class TeacherChatModel(BaseChatModel):
    """A chat model that plays ``steps`` (``schedule``) in order, one per call, written in ``mode``
    (``reply_text``) and tokenised by ``tokens`` (``Tokens``; None: no token ids). ``renames`` maps
    env tool names to the names the harness shows. One instance serves one episode."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    steps: list[Any] = Field(default_factory=list)
    mode: str = "native"
    answer_json: bool = False
    renames: dict[str, str] = Field(default_factory=dict)
    tokens: Any = None
    tools: list[dict] | None = None
    cursor: int = 0

    @property
    def _llm_type(self) -> str:
        return "coevo-harness-teacher"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "TeacherChatModel":
        """Keep the tool schemas: the prompt is rendered with them, as the policy's would be."""
        self.tools = [tool_schema(t) for t in tools]
        return self

    def _step(self, messages: list[BaseMessage]) -> Step:
        index = min(self.cursor, len(self.steps) - 1)
        self.cursor += 1
        step = self.steps[index]
        if step is None:
            previous = self.steps[index - 1]
            return belief_from(messages, previous[1] if isinstance(previous, tuple) else {})
        if isinstance(step, tuple):
            return self.renames.get(step[0], step[0]), step[1]
        return step

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        text = reply_text(self.mode, self._step(messages), self.answer_json)
        message = AIMessage(content=text, tool_calls=parse_tool_calls(text) if self.mode == "native" else [])
        if self.tokens is not None:
            prompt, completion = self.tokens(messages, kwargs.get("tools") or self.tools, text)
            message.response_metadata[TOKENS_KEY] = {"prompt_token_ids": prompt, "completion_token_ids": completion,
                                                     "logprobs": [0.0] * len(completion)}
        return ChatResult(generations=[ChatGeneration(message=message)])


def engine_tokens(policy: Any) -> Tokens:
    """``Tokens`` of a ``LocalChatModel`` policy: its engine's chat-template rendering and its
    tokenizer, the completion ending in the eos token as a sampled reply does. Raises
    ``TypeError`` for a policy without a local engine (a server's tokenizer is not reachable)."""
    engine = getattr(policy, "engine", None)
    if engine is None or not hasattr(engine, "render"):
        raise TypeError(f"the harness teacher tokenises with the policy's local engine; {type(policy).__name__} "
                        "has none: train harness SFT with a local: policy")
    eos = engine.tokenizer.eos_token_id

    def tokens(messages: Sequence[BaseMessage], tools: list[dict] | None, reply: str) -> tuple[list[int], list[int]]:
        ids = list(engine.tokenizer(reply, add_special_tokens=False)["input_ids"])
        return engine.render(messages, tools), ids + ([eos] if eos is not None else [])

    return tokens


def teacher_rollout(run: RolloutFn | None = None, tokens_of: Callable[[Any], Tokens] = engine_tokens) -> RolloutFn:
    """A rollout function (``arun_rollout``'s signature) that plays each task with a fresh
    ``TeacherChatModel`` over ``demonstration(env, task)`` instead of ``policy``, through ``run``
    (default ``arun_rollout``; e.g. ``with_experience``), the replies tokenised as ``policy`` would
    (``tokens_of(policy)``, default ``engine_tokens``). The trajectory is scored by the env like
    any rollout. Raises what ``demonstration`` and ``schedule`` raise."""
    from coevo.training.grpo.rollout import default_rollout_fn

    base = run or default_rollout_fn()

    async def run_teacher(spec: Any, policy: Any, env: Env, task: Task, *args: Any, **kwargs: Any) -> Trajectory:
        parser = spec.parser
        teacher = TeacherChatModel(steps=schedule(demonstration(env, task), spec.budget.max_model_calls),
                                   mode=parser.mode, answer_json=parser.mode == "json",
                                   renames=dict(spec.tool_view.renames), tokens=tokens_of(policy))
        return await base(spec, teacher, env, task, *args, **kwargs)

    return run_teacher
