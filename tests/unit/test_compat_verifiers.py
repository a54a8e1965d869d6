"""``coevo.compat``'s verifiers v1 reaches behave as verifiers' own paths: ``vf_config_type`` finds the config
class a taskset or env declares, ``vf_bare_env`` gives an env's agent seats as its own config declares them
without loading a harness, and ``vf_trace_stops`` keeps exactly the trace-typed ``@vf.stop`` predicates."""

import asyncio

import pytest

vf = pytest.importorskip("verifiers.v1")

from vf_guess import GuessEnv, GuessEnvConfig, GuessTaskset  # noqa: E402
from vf_reverse import ReverseConfig, ReverseData, ReverseTask, ReverseTaskset  # noqa: E402

from coevo.compat import vf_bare_env, vf_config_type, vf_trace_stops  # noqa: E402


def test_the_config_type_is_the_one_a_taskset_or_env_declares():
    assert vf_config_type(ReverseTaskset, vf.TasksetConfig, vf.Taskset) is ReverseConfig
    assert vf_config_type(GuessTaskset, vf.TasksetConfig, vf.Taskset) is vf.TasksetConfig
    assert vf_config_type(GuessEnv, vf.EnvConfig, vf.Env) is GuessEnvConfig


def test_a_bare_env_has_its_configs_seats_and_runs_without_a_harness():
    from verifiers.v1.envs.single_agent import SingleAgentEnv
    from verifiers.v1.envs.user_sim.env import UserSimEnv

    assert vf_bare_env(GuessEnv).seats == ["player"]
    assert vf_bare_env(SingleAgentEnv).seats == ["agent"]
    assert sorted(vf_bare_env(UserSimEnv).seats) == ["assistant", "user"]  # two seats: the adapter refuses it
    assert not hasattr(vf_bare_env(GuessEnv).env, "_harnesses")  # Env.__init__ (harness loading) did not run


class Both(vf.Task[vf.TaskData]):
    @vf.stop
    async def after_two(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 2

    @vf.stop
    async def on_request(self, request: vf.Request) -> bool:  # a model-request boundary: no counterpart here
        return True


def _trace(task, turns):
    from verifiers.v1.trace import AgentInfo, Trace, TraceTask

    trace = Trace(task=TraceTask(type="T", data=task.data, key=task.key, hash=task.hash),
                  agent=AgentInfo(config=vf.AgentConfig()))
    trace.nodes.append(vf.MessageNode(message=vf.UserMessage(content="go")))
    for i in range(turns):
        trace.nodes.append(vf.MessageNode(parent=len(trace.nodes) - 1, message=vf.AssistantMessage(content=str(i)),
                                          sampled=True))
    return trace


def test_the_trace_stops_are_the_tasks_trace_typed_stop_predicates():
    task = Both(vf.TaskData(prompt="go"))
    (stop,) = vf_trace_stops(task)
    assert [asyncio.run(stop(_trace(task, n))) for n in (1, 2)] == [False, True]
    reverse = ReverseTask(ReverseData(prompt="p", answer="q"))
    (single,) = vf_trace_stops(reverse)
    assert asyncio.run(single(_trace(reverse, 1)))


def test_tool_methods_are_named_as_verifiers_advertises_them_and_called_on_the_given_state():
    from vf_tools import Calc, CalcState

    from coevo.compat import vf_tool_call, vf_tool_methods

    server = Calc(vf.ToolsetConfig())
    ((name, fn),) = vf_tool_methods(server)
    assert name == f"{server.server_name}_multiply" == "calc_multiply"
    state = CalcState()
    assert asyncio.run(vf_tool_call(fn, state, {"a": 6, "b": 7})) == 42
    assert asyncio.run(vf_tool_call(fn, state, {"a": 2, "b": 3})) == 6 and state.calls == 2
    assert server.state.calls == 0  # outside a call the server sees its own inert state
