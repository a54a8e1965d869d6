"""Several servers behind the router, over real HTTP: two local stub servers and one closed port.
Every rollout succeeds, both servers share the load, and the dead one gets at most one attempt
per cooldown window (logged each time)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from server_kit import StubServer, free_port

from coevo.envs.registry import get_env
from coevo.evaluation.engine import evaluate
from coevo.harnesses import load_harness
from coevo.models.refs import load_model

pytestmark = pytest.mark.integration
COOLDOWN_S = 0.5


async def test_two_servers_and_a_closed_port_every_rollout_succeeds(caplog, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    env, spec = get_env("reasoning_gym:families=word_sorting"), load_harness("reasoning_gym")
    with StubServer(lambda m: "Final answer: a, b", latency_s=0.03, capacity=4) as a, \
            StubServer(lambda m: "Final answer: a, b", latency_s=0.03, capacity=4) as b:
        model = load_model(f"litellm:openai/stub?api_base={a.url},{dead},{b.url}&cooldown_s={COOLDOWN_S}",
                           timeout_s=10)
        started = time.monotonic()
        results = []
        with caplog.at_level(logging.WARNING, logger="coevo.models.router"):
            for seed in range(3):  # three evaluations, a cooldown apart
                results.append(await evaluate(spec, "stub", env, "val", n_tasks=16, seeds=seed, model=model,
                                              concurrency=8))
                await asyncio.sleep(COOLDOWN_S)
        elapsed = time.monotonic() - started
    assert all(r.n_rollouts == 16 and r.model_turns == 16 and set(r.stop_reasons) == {"final_answer"} for r in results)
    assert a.requests >= 8 and b.requests >= 8 and a.requests + b.requests == 48
    dead_server = model.pool.servers[1]
    assert dead_server.name == dead and dead_server.successes == 0
    assert 1 <= dead_server.attempts <= int(elapsed / COOLDOWN_S) + 1
    assert sum(f"server {dead} failed" in r.message for r in caplog.records) == dead_server.attempts
