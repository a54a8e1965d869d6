"""StageTrainer: the run's ``[train]`` section picks the algorithm, sets the rollouts' sampling and
builds each round's stage config; the checkpoint goes in and comes out through the archive as is."""

import asyncio

import pytest
from training_kit import LookupEnv

from coevo.config import RunConfig
from coevo.harnesses.spec import HarnessSpec
from coevo.models.checkpoint import Checkpoint
from coevo.models.trajectory import Trajectory
from coevo.storage import Archive
from coevo.training import rsft
from coevo.training.grpo import stage as grpo
from coevo.training.harness_s import Routed
from coevo.training.kinds import GRPO, RSFT
from coevo.training.schedule import PersistentSampler, WeightPhase
from coevo.training.stage import StageTrainer


@pytest.mark.parametrize("algorithm, module, name", [("grpo", grpo, "train_grpo"), ("rsft", rsft, "train_rsft")])
def test_stage_trainer_runs_the_configured_algorithm_with_the_rounds_stage_config(tmp_path, monkeypatch, algorithm,
                                                                                   module, name):
    calls = []

    def stage(checkpoint, spec, env, tasks, config, archive=None, *, run_id=None):
        calls.append((checkpoint, spec, tasks, config))
        new = Checkpoint(id="ck-new", base_model=checkpoint.base_model, parents=[checkpoint.id], run_id=run_id)
        archive.put(new)
        return new, [Trajectory(task_id=tasks[0].id)]

    monkeypatch.setattr(module, name, stage)
    config = RunConfig(seed=3, out_dir=str(tmp_path), train={"algorithm": algorithm, "temperature": 0.7,
                                                             "max_new_tokens": 12, "steps": 5})
    env, spec = LookupEnv(), HarnessSpec()
    with Archive(tmp_path / "a.db") as archive:
        base = Checkpoint(id="ck0", base_model="base", metrics={"loss": 1.0})
        archive.put(base)
        trainer = StageTrainer(config, env, archive, "r1")
        new_id, trajs = asyncio.run(trainer("ck0", spec, env.tasks(), 2))
        assert archive.get(Checkpoint, new_id).run_id == "r1" and archive.get(Checkpoint, new_id).parents == ["ck0"]
        with pytest.raises(KeyError, match="ck-missing"):
            asyncio.run(trainer("ck-missing", spec, env.tasks(), 2))
    ((checkpoint, used, tasks, stage_config),) = calls
    assert new_id == "ck-new" and [t.task_id for t in trajs] == ["lookup-a"] and tasks == env.tasks()
    assert checkpoint == base
    assert (used.decoding.temperature, used.budget.max_output_tokens) == (0.7, 12) and used.prompt == spec.prompt
    assert (spec.decoding.temperature, spec.budget.max_output_tokens) != (0.7, 12)
    assert stage_config == config.train.stage(2, 3, tmp_path) and (stage_config.seed, stage_config.steps) == (2003, 5)


@pytest.mark.parametrize("rescue", [True, False])
def test_stage_trainer_rescues_under_the_siblings_and_records_the_size_of_the_change(tmp_path, monkeypatch, rescue):
    from training_kit import random_adapter, tiny_llama_checkpoint

    seen = {}
    base = tiny_llama_checkpoint(tmp_path / "base")
    trained = random_adapter(base, tmp_path / "a", seed=1)

    def stage(checkpoint, spec, env, tasks, config, archive=None, *, run_id=None, rescue=None):
        seen["rescue"] = rescue
        new = trained.model_copy(update={"id": "ck-new", "parents": [checkpoint.id], "config": {"harness_id": spec.id}})
        archive.put(new)
        return new, []

    monkeypatch.setattr(grpo, "train_grpo", stage)
    config = RunConfig(out_dir=str(tmp_path), train={"rescue": rescue, "temperature": 0.5})
    env, spec = LookupEnv(), HarnessSpec()
    sibling = HarnessSpec(prompt={"system": "another harness"})
    with Archive(tmp_path / "a.db") as archive:
        archive.put(base)
        new_id, _ = asyncio.run(StageTrainer(config, env, archive, "r1")(base.id, spec, env.tasks(), 0,
                                                                     GRPO(siblings=(sibling,))))
        record = archive.get(Checkpoint, new_id)
    assert callable(seen["rescue"]) == rescue
    if rescue:  # one fresh attempt per failed rollout, under the sibling sampled like the incumbent
        from coevo.models.fake import ScriptedChatModel
        from coevo.training.kinds import training_spec

        task = env.tasks()[0]
        group = asyncio.run(seen["rescue"](task, [Trajectory(task_id=task.id)] * 2,
                                           policy=ScriptedChatModel(script=["Final answer: x"])))
        assert [t.harness_id for t in group] == [training_spec(sibling, config.train).id] * 2
    assert record.config["incumbent_id"] == spec.id and record.config["harness_id"] != spec.id  # the training variant
    assert record.metrics["delta_norm"] == record.metrics["total_delta_norm"] > 0  # trained from the base model


def test_a_stage_on_vllm_servers_samples_there_and_publishes_its_checkpoint(tmp_path, monkeypatch):
    from training_kit import random_adapter, tiny_llama_checkpoint

    from coevo.app.services import PolicyCache
    from coevo.models.router import RouterChatModel
    from coevo.nodes.loop import base_checkpoint
    from coevo.training import vllm_sync

    loads, unloads, seen = [], [], {}
    monkeypatch.setattr(vllm_sync, "load_lora_adapter", lambda root, name, path, **kw: loads.append((root, name)))
    monkeypatch.setattr(vllm_sync, "unload_lora_adapter", lambda root, name, **kw: unloads.append((root, name)))
    base = tiny_llama_checkpoint(tmp_path / "base")
    trained = random_adapter(base, tmp_path / "a", seed=1)

    def stage(checkpoint, spec, env, tasks, config, archive=None, *, run_id=None, policy_factory=None):
        seen["sampler"] = policy_factory
        policy_factory.loaded.append("coevo-r2-step7-abc")  # as after the stage's last step
        return trained.model_copy(update={"id": "ck-new", "parents": [checkpoint.id]}), []

    monkeypatch.setattr(grpo, "train_grpo", stage)
    roots = ["http://gpu0:8000", "http://gpu1:8000"]
    config = RunConfig(out_dir=str(tmp_path), policy=f"local:{base.base_model}", train={"vllm": roots})
    env = LookupEnv()
    with Archive(tmp_path / "a.db") as archive:
        archive.put(base)
        new_id, _ = asyncio.run(StageTrainer(config, env, archive, "r1")(base.id, HarnessSpec(), env.tasks(), 2))
        record = archive.get(Checkpoint, new_id)
        name = vllm_sync.adapter_name(record)
        assert isinstance(seen["sampler"], vllm_sync.VLLMStepSync) and seen["sampler"].roots == roots
        assert seen["sampler"].adapter_dir == tmp_path.resolve() / "adapters" / "vllm-sync" / "round-2"
        assert loads == [(root, name) for root in roots]  # published on every server
        assert unloads == [(root, "coevo-r2-step7-abc") for root in roots]  # the last step's adapter dropped
        assert record.vllm == roots and record.model_ref == vllm_sync.served_ref(roots, name)
        policy = PolicyCache(config, archive)(new_id)  # evaluated through the servers, loaded there again first
        assert isinstance(policy, RouterChatModel) and {s.model for s in policy.servers} == {f"hosted_vllm/{name}"}
        assert len(loads) == 4
    w0 = base_checkpoint(config)
    assert w0.model_ref == "litellm:hosted_vllm/policy?api_base=http://gpu0:8000/v1,http://gpu1:8000/v1"
    local = config.model_copy(update={"train": config.train.model_copy(update={"vllm": []})})
    assert w0.id != base_checkpoint(local).id and base_checkpoint(local).model_ref == config.policy
    assert RunConfig(train={"vllm": ",".join(roots)}).train.vllm == roots  # --set train.vllm=URL1,URL2
    with pytest.raises(ValueError, match="train.vllm samples GRPO"):
        RunConfig(train={"algorithm": "rsft", "vllm": roots})


def test_a_run_stage_on_a_fake_vllm_samples_the_synced_adapter_and_publishes_the_checkpoint(tmp_path):
    """The GPU path end to end on CPU: TRL's GRPO on the tiny model, each step's adapter hot-loaded
    into a fake vLLM under its content-hashed name, rollouts sampled there through the executor,
    Eq. 16 on the server's logprobs, the checkpoint published and evaluated through the server."""
    import itertools

    from server_kit import FakeVLLM
    from training_kit import NAMING_WORDS, NamingEnv, tiny_llama_checkpoint

    from coevo.app.services import PolicyCache
    from coevo.evaluation.executors import InProcessExecutor
    from coevo.training.vllm_sync import adapter_name, served_ref

    class Counting(InProcessExecutor):
        ran = 0

        async def rollout(self, *args, **kwargs):
            self.ran += 1
            return await super().rollout(*args, **kwargs)

    right = {kind: itertools.cycle([True, False]) for kind in ("fruits", "colors")}  # one of two right per task

    def answer(messages):
        kind = "fruits" if "fruits" in str(messages) else "colors"
        return "Final answer: " + (" ".join(NAMING_WORDS[kind][:3]) if next(right[kind]) else "none")

    base = tiny_llama_checkpoint(tmp_path / "base")
    env, runner = NamingEnv(), Counting()
    with FakeVLLM(reply=answer) as server, Archive(tmp_path / "a.db") as archive:
        config = RunConfig(out_dir=str(tmp_path), policy=f"local:{base.base_model}",
                           train={"vllm": [server.root], "steps": 1, "tasks_per_step": 2, "num_generations": 2,
                                  "max_new_tokens": 8, "lora_r": 4, "resample": 0})
        archive.put(base)
        new_id, trajs = asyncio.run(StageTrainer(config, env, archive, "r1", runner)(base.id, HarnessSpec(),
                                                                                     env.tasks(), 0))
        record = archive.get(Checkpoint, new_id)
        name = adapter_name(record)
        step = next(n for action, n in server.events if action == "load")
        assert step.startswith("coevo-r0-step0-") and step != name
        assert server.events == [("load", step)] + [("chat", step)] * 4 + [("load", name), ("unload", step)]
        assert runner.ran == 4 and sorted(t.reward for t in trajs) == [0.0, 0.0, 1.0, 1.0]
        assert all(t.calls[0].logprobs == [-0.5] * len(t.calls[0].completion_token_ids) for t in trajs)
        assert record.config["importance_correction"] is True and "is_weight_mean" in record.metrics["history"][0]
        assert record.model_ref == served_ref([server.root], name) and server.adapters == {
            name: record.adapter_path}
        reply = PolicyCache(config, archive)(new_id).invoke("Name three fruits.")  # through the server, as published
        assert reply.content.startswith("Final answer:") and server.events[-1] == ("chat", name)


def test_one_stage_keeps_the_runs_executor_with_a_router_or_a_whale_phase(tmp_path, monkeypatch):
    """The merged weight stage (wt-exec's executor, wt-hs's route, wt-whale's phase, wt-track's
    tracker): a routed rescue samples on the run's executor like a ranked one, and a WHALE phase's
    RSFT options reach ``train_rsft`` together with the executor and the tracked stage config."""
    from coevo.evaluation import executors
    from coevo.evaluation.executors import InProcessExecutor
    from coevo.training.grpo import rollout

    runner, placed, seen = InProcessExecutor(), object(), {}
    monkeypatch.setattr(executors, "sampling_on", lambda executor, rollout_fn=None: placed)
    monkeypatch.setattr(rollout, "sibling_rescue",
                        lambda siblings, env, rollout_fn=None, seed=0: ("rescue", callable(siblings), rollout_fn))

    def stage(checkpoint, spec, env, tasks, config, archive=None, *, run_id=None, **options):
        seen.update(options, config=config)
        new = Checkpoint(id=f"ck-{len(seen)}", base_model=checkpoint.base_model, parents=[checkpoint.id])
        archive.put(new)
        return new, []

    monkeypatch.setattr(grpo, "train_grpo", stage)
    monkeypatch.setattr(rsft, "train_rsft", stage)
    env, spec, sibling = LookupEnv(), HarnessSpec(), HarnessSpec(prompt={"system": "another harness"})

    async def route(task, k):
        return [sibling.id]

    with Archive(tmp_path / "a.db") as archive:
        archive.put(Checkpoint(id="ck0", base_model="base"))
        grpo_run = RunConfig(out_dir=str(tmp_path), train={"rescue": False})
        asyncio.run(StageTrainer(grpo_run, env, archive, "r1", runner)("ck0", spec, env.tasks(), 0,
                                                                        Routed(siblings=(sibling,), route=route)))
        assert seen["executor"] is runner and seen["rescue"] == ("rescue", True, placed)  # routed, on the executor
        seen.clear()
        rsft_run = RunConfig(out_dir=str(tmp_path), report_to="tensorboard", train={"algorithm": "rsft"})
        stop = lambda rewards: None  # noqa: E731
        phase = WeightPhase(PersistentSampler(0), env.tasks(), position=5, max_steps=2, stop=stop)
        asyncio.run(StageTrainer(rsft_run, env, archive, "r1", runner)("ck0", spec, env.tasks(), 1,
                                                                        RSFT(phase=phase)))
    assert seen["executor"] is runner and (seen["position"], seen["max_steps"], seen["stop"]) == (5, 2, stop)
    assert seen["config"].report_to == "tensorboard" and seen["config"].run_name == "r1/round1"
