"""Fakes for the knob-effect test (``test_knobs.py``): a word env with two failure causes, solved
controls and a spare train tail for a search split; a fake meta-loop run of any strategy family
from dotted config overrides; the real GRPO and RSFT stages on the tiny Llama; and the
observations each returns. Every observer is deterministic: the same overrides give the same
observation, so a flip that changes nothing is a silent knob."""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from test_harness_s import RescueTrainer
from test_meta_loop import FakeTrainer
from test_whale import PhaseTrainer
from training_kit import LookupEnv, belief_policy, tiny_chat_checkpoint, tiny_llama_checkpoint

from coevo.app.run import run_meta
from coevo.app.services import meta_roles
from coevo.config import load_config
from coevo.envs.base import Episode, Score, Task
from coevo.harnesses.spec import HarnessSpec, Prompt
from coevo.meta.context import MetaContext
from coevo.models.fake import ScriptedChatModel
from coevo.records import Ballot, Checkpoint, EditRecord, EvaluationRecord, Promotion
from coevo.roles.curator import curator_for
from coevo.roles.editor import OfflineEditor, demonstration_source
from coevo.roles.proposer import OfflineProposer
from coevo.storage import Archive
from coevo.strategies import get_strategy

TRAIN = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "nut"]
SEARCH = ["mango", "melon", "olive", "peach"]
VAL = ["yuzu", "quince", "lemon", "grape"]
TEST = ["cherry", "guava", "papaya", "lychee"]
SOLVED = {"plum", "fig", "nut", "grape"}
"""Right under any harness: demonstration sources and local-check controls, and one val task where b = c."""
VALUE = {"kiwi", "lime", "olive", "peach"}
"""Fail with ``checker:value_error``; every other unsolved word with ``checker:wrong_func_name``."""


class KnobEnv:
    """Repeat-the-word tasks (train: ``TRAIN`` then ``SEARCH``); the verifier's public error type says
    which of two causes (same family ``checker``) a miss has; ``reveal`` gives the gold word."""

    name = "words"

    def tasks(self, split: str, n: int | None = None) -> list[Task]:
        words = {"train": TRAIN + SEARCH, "val": VAL, "test": TEST}[split][:n]
        return [Task(id=f"w-{w}", env=self.name, split=split, prompt=f"Repeat the word: {w}") for w in words]

    def episode(self, task: Task, seed: int = 0) -> Episode:
        return Episode(task=task)

    def reveal(self, task: Task) -> str:
        return task.prompt.rsplit(" ", 1)[1]

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        gold = self.reveal(task)
        ok = (answer or "").strip() == gold
        error = "checker:value_error" if gold in VALUE else "checker:wrong_func_name"
        detail = {} if ok else {"expected": gold, "public": {"error_type": error}}
        return Score(reward=float(ok), passed=ok, detail=detail)


def knob_policy() -> ScriptedChatModel:
    """Right when the system prompt carries the offline rule for ``wrong_func_name``, or on ``SOLVED``."""

    def reply(messages: list[BaseMessage]) -> AIMessage:
        system, task = str(messages[0].content), str(messages[-1].content)
        word = task.rsplit(" ", 1)[1]
        right = "Call exactly the function" in system or word in SOLVED
        return AIMessage(content=f"Final answer: {word if right else 'banana'}")

    return ScriptedChatModel(script=[reply])


BASE = {"rounds": 2, "policy": "fake:words", "env.ref": "words", "env.n_train": 8, "env.n_val": 4, "env.n_test": 4,
        "meta.smoke_tasks": 2, "meta.local_check": True, "meta.local_tasks": 4, "meta.local_controls": 0,
        "search.tasks": 2, "train.tasks_per_step": 1, "harness_s.proposals": [2, 2]}
"""What every fake run starts from (dotted keys); a probe adds its own base and its flip."""
RULE = ("verifier_hint_rule",)
"""The offline operator the fake policy needs (the rule for ``wrong_func_name``): the run's editor and
proposer draw only it, so a candidate can pass and the gate's and rescue's keys have a decision to change
(the operator library's sampling is tested in test_operators.py); a second sample has no edit."""


def run(over: dict[str, Any]) -> dict[str, Any]:
    """A fake meta-loop run of ``over["strategy"]`` (default vace) with ``BASE`` and ``over`` applied,
    its trainer a fake of its family; returns ``observe``'s summary."""
    folder = Path(tempfile.mkdtemp(prefix="knob-"))
    h0 = HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.", output_format="Reply 'Final answer: X'."))
    (folder / "h0.json").write_text(h0.model_dump_json())
    config = load_config(None, {**BASE, "db": str(folder / "run.db"), "out_dir": str(folder),
                                "harness": str(folder / "h0.json"), **over})
    archive, env, model = Archive(config.db), KnobEnv(), knob_policy()
    strategy = get_strategy(config.strategy)
    trainer: Any = None
    if strategy.trains:
        family = {"whale": PhaseTrainer(archive, config.train.tasks_per_step, [0.1, 0.5, 0.4, 0.3, 0.2, 0.1]),
                  "harness_s": RescueTrainer(env, model, archive)}
        trainer = family.get(strategy.family) or FakeTrainer(env, model, archive)
    roles = meta_roles(config, env, strategy.roles)
    editor = OfflineEditor(demo_answer=demonstration_source(env), seed=config.seed, operators=RULE)
    pinned = {"editor": editor, "proposer": OfflineProposer(curator_for(config, env), editor)}
    roles.update({k: v for k, v in pinned.items() if k in roles})
    ctx = MetaContext(config=config, env=env, archive=archive, policy=lambda ckpt: model, trainer=trainer,
                      run_id="run-1", **roles)
    state = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    return observe(state, archive, trainer)


def observe(state: dict[str, Any], archive: Archive, trainer: Any) -> dict[str, Any]:
    """What a run did, without ids that embed paths or times: rounds, candidates and their fates,
    gate decisions, edits, every evaluation (split, k, tasks, seeds, decoding temperature), the
    trainer's stages, phases, pool, votes, promotions, test keys and whether the run paused."""
    evaluations = sorted((e.split, e.k, tuple(e.task_ids), tuple(e.seeds), (e.aggregates or {}).get("temperature"))
                         for e in archive.list(EvaluationRecord, run_id="run-1"))
    stages = getattr(trainer, "stages", None) or getattr(trainer, "phases", None) or getattr(trainer, "routed", None)
    return {
        "history": [(h.round, h.incumbent_val, tuple(c.fate for c in h.candidates)) for h in state.get("history", [])],
        "decisions": [(d.round, d.b, d.c, d.accepted) for d in state.get("decisions", [])],
        "edits": sorted((e.round, e.status, e.reason[:40], len(e.patch))
                        for e in archive.list(EditRecord, run_id="run-1")),
        "evaluations": evaluations,
        "stages": repr(stages),
        "phases": [(p.kind, p.length, p.steps, p.stop_reason) for p in state.get("phases", [])],
        "pool": [(m.round, m.selected, tuple(m.causes)) for m in state.get("pool", [])],
        "votes": sorted((v.purpose, len(v.ranking)) for v in archive.list(Ballot, run_id="run-1")),
        "promotions": [(p.accepted, p.reason[:40]) for p in archive.list(Promotion, run_id="run-1")],
        "test": sorted(state.get("test", {})),
        "paused": "__interrupt__" in state,
    }




# -- the real weight stages on the tiny Llama ------------------------------------------------------


def keyed_policy() -> ScriptedChatModel:
    """``LookupEnv``'s policy: looks the key up, then answers right on every other episode of task
    ``b`` and never on task ``a`` (so ``a``'s groups have no reward contrast). Emits char token ids."""
    counts = {"a": 0, "b": 0}

    def reply(messages: list[BaseMessage]) -> str:
        seen = [str(m.content) for m in messages if "VALUE-" in str(m.content)]
        task = next(str(m.content) for m in messages if "look up" in str(m.content)).rsplit(" ", 1)[-1]
        if not seen:
            return f'[lookup(key="{task}")]'
        counts[task] += 1
        right = task == "b" and counts[task] % 2 == 1
        return f"Final answer: VALUE-{task}" if right else "Final answer: nope"

    return ScriptedChatModel(script=[reply], with_tokens=True)


_BASE_MODEL: dict[str, Any] = {}


def base_checkpoint() -> Any:
    """The tiny random Llama, saved once per test session."""
    if "ckpt" not in _BASE_MODEL:
        _BASE_MODEL["ckpt"] = tiny_llama_checkpoint(Path(tempfile.mkdtemp(prefix="knob-llama-")))
    return _BASE_MODEL["ckpt"]


def adapter_digest(adapter_path: str) -> str:
    """sha256 over the adapter's tensors (names sorted): equal iff the trained weights are bit-identical."""
    from safetensors.torch import load_file

    tensors = load_file(str(Path(adapter_path) / "adapter_model.safetensors"))
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name].float().numpy().tobytes())
    return digest.hexdigest()


STAGE = {"steps": 1, "tasks_per_step": 2, "num_generations": 2, "learning_rate": 5e-2}
"""The stage every GRPO / RSFT probe starts from (a probe adds its base and its flip)."""
TIMING = {"rollout_s", "sampled_tokens_per_s", "wall_time_s"}


def grpo(over: dict[str, Any], spec: HarnessSpec | None = None, policy: ScriptedChatModel | None = None
         ) -> dict[str, Any]:
    """One real GRPO stage (``train_grpo``) on ``LookupEnv`` under ``spec`` (default: python calls)
    with ``policy`` (default ``keyed_policy``) sampling and a rollout function that records the peak
    number of rollouts in flight; returns the adapter's digest, the trajectories' (task, reward), the
    per-step metrics (timings dropped) and the peak."""
    from coevo.harnesses.runtime import arun_rollout
    from coevo.training.grpo.stage import train_grpo

    flight = {"now": 0, "peak": 0}

    async def counted(*args: Any, **kwargs: Any) -> Any:
        flight["now"] += 1
        flight["peak"] = max(flight["peak"], flight["now"])
        try:
            await asyncio.sleep(0)
            return await arun_rollout(*args, **kwargs)
        finally:
            flight["now"] -= 1

    env = LookupEnv()
    spec = spec or HarnessSpec(parser={"mode": "python_call"})
    config = {**STAGE, **over, "output_dir": tempfile.mkdtemp(prefix="knob-grpo-")}
    policy = policy or keyed_policy()
    new, trajectories = train_grpo(base_checkpoint(), spec, env, env.tasks(), config,
                                   policy_factory=lambda trainer: policy, rollout_fn=counted)
    history = [{k: v for k, v in h.items() if k not in TIMING} for h in new.metrics["history"]]
    return {"adapter": adapter_digest(new.adapter_path), "trajectories": [(t.task_id, t.reward) for t in trajectories],
            "history": history, "tokens": new.metrics["tokens"], "peak": flight["peak"]}


def cost_aware(over: dict[str, Any]) -> dict[str, Any]:
    """``grpo`` under a BPE harness with ``belief_policy`` (EvoHarness-RL's cost-aware GRPO)."""
    return grpo(over, HarnessSpec(parser={"mode": "python_call"}, bpe={}), belief_policy())


def rsft(over: dict[str, Any]) -> dict[str, Any]:
    """One real RSFT stage (``train_rsft``, 4 samples per task) on ``LookupEnv``; the live sampler
    (``_local``) is replaced by the scripted policy, recording the batch size it was built with. Returns the adapter's
    digest, the per-round kept counts and SFT steps, and that batch size."""
    from coevo.training import rsft as module

    built: dict[str, Any] = {}

    def local(model: Any, tokenizer: Any, max_batch: int, threads: int | None = None) -> Any:
        built["max_batch"], built["threads"] = max_batch, threads
        return keyed_policy()

    original = module._local
    module._local = local
    try:
        env = LookupEnv()
        spec = HarnessSpec(parser={"mode": "python_call"})
        config = {**STAGE, "num_generations": 4, **over, "output_dir": tempfile.mkdtemp(prefix="knob-rsft-")}
        new, _ = module.train_rsft(base_checkpoint(), spec, env, env.tasks(), config)
    finally:
        module._local = original
    rounds = [(h["kept"], h["sft_steps"]) for h in new.metrics["history"]]
    return {"adapter": adapter_digest(new.adapter_path), "rounds": rounds, "max_batch": built.get("max_batch")}


def harness_sft(over: dict[str, Any]) -> dict[str, Any]:
    """One real supervised harness fine-tuning stage (``StageTrainer`` with the ``HarnessSFT`` kind
    = 1) on ``LookupEnv`` (with ``reveal``) under a BPE json harness from the tiny chat checkpoint,
    the run config ``over`` applied (``evoharness.teacher``: the scripted teacher plays, else the live
    tiny policy samples). Returns the adapter's digest and the round's kept count and SFT tokens."""
    from coevo.training.evoharness.sft import HarnessSFT
    from coevo.training.stage import StageTrainer

    class Revealed(LookupEnv):
        def reveal(self, task: Task) -> str:
            return f"VALUE-{task.metadata['key']}"

    folder = Path(tempfile.mkdtemp(prefix="knob-hsft-"))
    stage = {**STAGE, "tasks_per_step": 1}  # one group: the teacher's BPE turns are long rows (the costliest probe)
    config = load_config(None, {"out_dir": str(folder), **{f"train.{k}": v for k, v in stage.items()}, **over})
    env, spec = Revealed(), HarnessSpec(parser={"mode": "json"}, bpe={})
    with Archive(folder / "a.db") as archive:
        archive.put(tiny_chat_checkpoint(folder / "base"))
        new_id, _ = asyncio.run(StageTrainer(config, env, archive, "r1")("ckpt-tiny", spec, env.tasks(), 0,
                                                                          HarnessSFT(rounds=1)))
        new = archive.get(Checkpoint, new_id)
    (round_,) = new.metrics["history"]
    return {"adapter": adapter_digest(new.adapter_path), "kept": round_["kept"], "tokens": round_["tokens"]}
