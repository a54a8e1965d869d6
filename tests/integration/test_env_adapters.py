"""The env adapters (issue 28) against real environments of each package, offline: Gymnasium's
FrozenLake-v1 and Taxi-v4 (multi-turn: played step by step through coevo's harness graph),
OpenEnv's own echo environment (``openenv init``'s template) in process (multi-turn) and through
OpenEnv's client against a local server. verifiers' v1 tasksets (single- and multi-turn) run through the
harness graph, coevo eval's engine and one meta-loop round in tests/unit/test_env_verifiers_loop.py."""

import asyncio
import json
from collections import deque

import pytest

from coevo.envs.registry import get_env
from coevo.harnesses import load_harness
from coevo.harnesses.runtime import arun_rollout
from coevo.models.fake import ScriptedChatModel

pytestmark = pytest.mark.integration


def act(action: str) -> str:
    return json.dumps({"tool": "step", "arguments": {"action": action}})


def test_gym_frozen_lake_is_won_by_the_shortest_path_through_the_harness_graph():
    pytest.importorskip("gymnasium")
    env = get_env("gym:FrozenLake-v1,size=4,is_slippery=false")
    (task,) = env.tasks("train")  # a deterministic start: four reset seeds are one task
    assert "[S|on red]" in task.prompt and "left, down, right, up" in task.prompt
    script = [act(a) for a in ("down", "down", "right", "right", "down", "right")] + ['{"final_answer": "done"}']
    traj = asyncio.run(arun_rollout(load_harness("gym"), ScriptedChatModel(script=script), env, task))
    assert traj.passed and traj.reward == 1.0 and traj.env_actions == 6
    assert traj.score_detail["public"]["terminated"] and traj.score_detail["public"]["return"] == 1.0
    into_hole = [act("right"), act("down"), '{"final_answer": "done"}']
    lost = asyncio.run(arun_rollout(load_harness("gym"), ScriptedChatModel(script=into_hole), env, task))
    assert lost.score_detail["public"]["terminated"] and not lost.passed and lost.reward == 0.0


def shortest_actions(gym_id: str, reset_seed: int) -> list[int]:
    """The shortest winning action sequence of a Taxi episode, by breadth-first search over its
    transition table ``P`` (the env's own model)."""
    import gymnasium

    raw = gymnasium.make(gym_id)
    start, _ = raw.reset(seed=reset_seed)
    table = raw.unwrapped.P
    paths, queue = {start: []}, deque([start])
    while queue:
        s = queue.popleft()
        for a, [(_, nxt, r, done)] in table[s].items():
            if done and r > 0:
                return paths[s] + [a]
            if nxt not in paths:
                paths[nxt] = paths[s] + [a]
                queue.append(nxt)
    raise AssertionError("no winning path")


def test_gym_taxi_multi_turn_episode_scores_a_delivery_and_not_a_wander():
    pytest.importorskip("gymnasium")
    env = get_env("gym:Taxi-v4,size=6,seed=1")
    tasks = env.tasks("train")
    assert len(tasks) >= 2 and len({t.prompt for t in tasks}) == len(tasks)
    task = tasks[0]
    names = ["south", "north", "east", "west", "pickup", "dropoff"]
    plan = [names[a] for a in shortest_actions("Taxi-v4", task.metadata["reset_seed"])]
    assert "pickup" in plan and plan[-1] == "dropoff" and len(plan) >= 4
    script = [act(a) for a in plan] + ['{"final_answer": "done"}']
    traj = asyncio.run(arun_rollout(load_harness("gym"), ScriptedChatModel(script=script), env, task))
    assert traj.passed and traj.env_actions == len(plan) and traj.model_turns == len(plan) + 1
    observations = [m for m in traj.messages if "Reward:" in str(m["data"]["content"])]
    assert len(observations) == len(plan)
    assert any("on green" in str(m["data"]["content"]) for m in observations)  # the taxi carrying the passenger
    wander = [act("north"), act("south"), '{"final_answer": "done"}']
    stray = asyncio.run(arun_rollout(load_harness("gym"), ScriptedChatModel(script=wander), env, task))
    assert not stray.passed and stray.score_detail["public"]["return"] == -2.0


def test_gym_adapter_refuses_an_action_space_it_cannot_play_and_a_partial_reward():
    pytest.importorskip("gymnasium")
    with pytest.raises(ValueError, match="Text or Discrete"):
        get_env("gym:Pendulum-v1")  # a continuous (Box) action space
    with pytest.raises(ValueError, match="no partial credit"):
        get_env("gym:Taxi-v4", reward="partial")


@pytest.fixture(scope="module")
def echo_env(tmp_path_factory):
    """OpenEnv's own environment template (``openenv init``: the echo environment), generated offline."""
    pytest.importorskip("openenv.core")
    import subprocess
    import sys
    from pathlib import Path

    root = tmp_path_factory.mktemp("openenv")
    cli = Path(sys.executable).with_name("openenv")
    subprocess.run([str(cli), "init", "echo_env", "-o", str(root)], check=True, capture_output=True, timeout=120)
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))


def test_openenv_echo_in_process_multi_turn_reaches_the_return_through_the_harness_graph(echo_env):
    env = get_env("openenv:echo_env.server.echo_env_environment:EchoEnvironment,size=3,success=1.5")
    (task,) = env.tasks("train")  # its reset ignores the seed: one task
    assert "echoed_message" in task.prompt and "arguments: message" in task.prompt
    say = [json.dumps({"tool": "step", "arguments": {"message": m}}) for m in ("hello", "world, again")]
    h0 = load_harness("openenv")
    traj = asyncio.run(arun_rollout(h0, ScriptedChatModel(script=[*say, '{"final_answer": "done"}']), env, task))
    assert traj.passed and traj.env_actions == 2 and traj.score_detail["public"]["return"] == pytest.approx(1.7)
    short = asyncio.run(arun_rollout(h0, ScriptedChatModel(script=[say[0], '{"final_answer": "x"}']), env, task))
    assert not short.passed and short.score_detail["public"]["return"] == pytest.approx(0.5)


def test_openenv_echo_through_its_client_against_a_local_server(echo_env):
    import socket
    import threading
    import time

    import uvicorn
    from echo_env.server.app import app as server_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(server_app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        env = get_env(f"openenv:url=http://127.0.0.1:{port},size=2,success=1.0")
        (task,) = env.tasks("train")
        episode = env.episode(task)
        try:
            assert episode.tools[0].parameters["required"] == ["message"]
            assert "hello world" in episode.tools[0].fn(message="hello world")
            assert env.score(task, "done", episode).passed
        finally:
            episode.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
