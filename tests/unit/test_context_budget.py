"""The context-budget check counts as the policy does: with a local policy's own tokenizer and chat
template, against the smaller of the harness's ``max_context_tokens`` and the policy's context — so a
prompt of emoji or digits (many tokens, few characters) is refused before any rollout, and a rollout
whose context outgrows the model ends ``budget:context_tokens`` instead of a traceback."""

from __future__ import annotations

import asyncio

import pytest
from test_evaluate import AdderEnv
from test_local_model import tiny_llama, tiny_tokenizer
from test_meta_loop import setup_run

from coevo.harnesses import HarnessError, HarnessSpec
from coevo.harnesses.fit import TokenMeter, meter_of, prompt_fit
from coevo.harnesses.runtime import arun_rollout
from coevo.meta.state import Candidate, Direction
from coevo.models.local import LocalChatModel
from coevo.nodes.refine import check_one
from coevo.records import Trajectory

CONTEXT = 512
"""The tiny llama's context (tokens); its byte-level tokenizer spends 4 tokens on an emoji, 1 on a digit."""
EMOJI = "\N{SLIGHTLY SMILING FACE}" * 200
"""200 characters (~50 tokens at 4 characters a token), 800 tokens to the policy."""


@pytest.fixture(scope="module")
def chat():
    tokenizer = tiny_tokenizer()
    model = LocalChatModel.from_model(tiny_llama(tokenizer, positions=CONTEXT), tokenizer, max_tokens=4)
    yield model
    model.engine.close()


def harness(system: str = "You add.", budget: int = 16_000) -> HarnessSpec:
    return HarnessSpec(name="h", prompt={"system": system}, budget={"max_context_tokens": budget})


def test_a_local_policy_offers_its_tokenizer_and_context_through_any_binding(chat):
    meter = meter_of(chat.bind(stop=["x"]).with_config(tags=["t"]))
    assert meter.context == CONTEXT and meter.count is not None
    assert meter_of(object()) == TokenMeter()  # a policy without them: the estimate, no context of its own


@pytest.mark.parametrize("system", [EMOJI, "7" * 700])
def test_a_prompt_of_emoji_or_digits_is_counted_by_the_policys_tokenizer(chat, system):
    spec = harness(system)
    assert prompt_fit(spec, ["Task 1"]).fits  # the character estimate lets it through ...
    fit = prompt_fit(spec, ["Task 1"], meter=meter_of(chat))  # ... the policy's tokenizer does not
    assert fit.none_fit and fit.largest > CONTEXT and fit.budget == CONTEXT - 1
    text = " ".join(fit.text().split())
    assert "by the policy's tokenizer" in text and "context budget of 511 tokens" in text
    assert "smaller than the harness's budget.max_context_tokens of 16,000" in text
    assert "use a policy with a longer context" in text


def test_the_budget_is_the_smaller_of_the_harness_and_the_policy_context(chat):
    meter = meter_of(chat)
    assert meter.budget(harness(budget=16_000)) == CONTEXT - 1
    assert meter.budget(harness(budget=100)) == 100
    small = prompt_fit(harness("7" * 200, budget=100), ["Task 1"], meter=meter)
    assert small.none_fit and small.harness_budget is None and "raise budget.max_context_tokens" in small.text()


def test_a_rollout_over_the_policys_context_ends_by_budget_not_a_traceback(chat):
    env = AdderEnv(size=1)
    task = env.tasks("val")[0]
    traj = asyncio.run(arun_rollout(harness(EMOJI), chat, env, task))
    assert traj.stop_reason == "budget:context_tokens" and traj.calls == []
    fits = asyncio.run(arun_rollout(harness("Add."), chat, env, task))  # a short prompt still calls the model
    assert fits.calls and fits.stop_reason != "budget:context_tokens"


def test_a_run_refuses_an_h0_over_the_policys_context_before_anything_is_stored(tmp_path, monkeypatch, chat):
    from coevo.app.run import preflight
    from coevo.envs import registry
    from coevo.models import refs
    from coevo.strategies import get_strategy

    config, _, _ = setup_run(tmp_path, "help")
    (tmp_path / "emoji.json").write_text(harness(EMOJI).model_dump_json())
    config.harness = str(tmp_path / "emoji.json")
    config.policy = "local:tiny"
    monkeypatch.setattr(registry, "get_env", lambda ref, **kw: AdderEnv())
    monkeypatch.setattr(refs, "load_model", lambda ref, **kw: chat)
    with pytest.raises(HarnessError, match="by the policy's tokenizer") as err:
        preflight(config, get_strategy("harness_only"))
    assert "context budget of 511 tokens" in str(err.value)


def test_the_check_node_counts_a_candidate_with_the_policys_tokenizer(tmp_path, chat):
    config, ctx, archive = setup_run(tmp_path, "help")
    ctx.policy = lambda checkpoint: chat
    parent = archive.add_harness(harness())
    child = archive.add_harness(harness(EMOJI))
    cand = Candidate(id="c1", direction="d1", parent_id=parent, spec_id=child)
    direction = Direction(id="d1", cause="wrong_answer", description="", task_ids=[])
    reason = asyncio.run(check_one(ctx, {"round": 0, "checkpoint": "ck"}, cand, direction, []))
    assert reason.startswith("context budget: all 4 tasks' prompts") and "by the policy's tokenizer" in reason
    assert archive.count(Trajectory) == 0  # refused before any rollout
