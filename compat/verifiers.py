"""verifiers v1: a taskset played without verifiers' harness and runtime (``coevo.compat`` lists each
reach and its reason)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable


def vf_config_type(cls: type, base: type, origin: type) -> type:
    """The config class ``cls`` (a verifiers ``Taskset`` or ``Env`` subclass) declares through its generic
    parameters, else ``base``. Why: verifiers reads it with its private ``utils.generic.concrete_type``.
    Tested on verifiers 0.4.0."""
    from verifiers.v1.utils.generic import concrete_type

    return concrete_type(cls, base, origin=origin) or base


@dataclass
class VfBareEnv:
    """A verifiers ``Env`` without its harnesses, runtimes and servers, and the names of its agent seats."""

    env: Any
    seats: list[str]


def vf_bare_env(env_cls: type) -> VfBareEnv:
    """An instance of verifiers ``Env`` subclass ``env_cls`` whose ``setup``/``run`` coevo calls with its own
    agents: its config is the default of the config class it declares, and ``Env.__init__`` (which loads a
    harness and a taskset by id and serves tools) does not run. Why: verifiers has no public way to run an
    env's episode logic with agents it did not make. Tested on verifiers 0.4.0."""
    import verifiers.v1 as vf
    from verifiers.v1.configs.agent import agent_config_fields

    env = env_cls.__new__(env_cls)
    env.config = vf_config_type(env_cls, vf.EnvConfig, vf.Env)()
    return VfBareEnv(env=env, seats=list(agent_config_fields(env.config)))


def vf_trace_stops(task: Any) -> list[Callable[[Any], Any]]:
    """The task's ``@vf.stop`` predicates that read the trace (those on a model request or response have no
    counterpart here), each as ``async (trace) -> bool``. Why: verifiers sorts them by boundary with its
    private ``session.hook_boundary`` and calls them with ``call_hook``. Tested on verifiers 0.4.0."""
    from verifiers.v1.session import call_hook, hook_boundary
    from verifiers.v1.trace import Trace

    async def check(fn: Callable[..., Any], trace: Any) -> bool:
        return bool(await call_hook(fn, {Trace: trace, "trace": trace, "task": task.data}))

    return [partial(check, fn) for fn in task.hooks("stop") if hook_boundary(fn, allow_trace=True) is Trace]


def vf_tool_methods(server: Any) -> list[tuple[str, Callable[..., Any]]]:
    """The ``@vf.tool`` methods of verifiers ``Toolset`` ``server`` as ``(name, method)``, named as verifiers
    advertises them to the model (``<server>_<tool>``, or the bare tool name for a server without a prefix).
    Why: verifiers lists them with its private ``utils.decorators.discover_decorated`` when it registers the
    MCP server. Tested on verifiers 0.4.0."""
    from verifiers.v1.utils.decorators import discover_decorated

    prefix = server.server_name
    named = ((getattr(fn, "tool_name", None) or fn.__name__, fn) for fn in discover_decorated(server, "tool"))
    return [(f"{prefix}_{name}" if prefix else name, fn) for name, fn in named]


async def vf_tool_call(fn: Callable[..., Any], state: Any, arguments: dict[str, Any]) -> Any:
    """Call a ``Toolset``'s tool method ``fn`` in process with ``state`` as the rollout state it reads and
    writes (``self.state``). Why: verifiers runs the toolset as an MCP server and syncs the state over an
    HTTP channel around each call (``ServerBase._with_state``, through the private context variable
    ``mcp.server._call_state``); coevo's episode holds the state itself. Tested on verifiers 0.4.0."""
    from verifiers.v1.mcp.server import _call_state

    token = _call_state.set(state)
    try:
        result = fn(**arguments)
        return await result if inspect.isawaitable(result) else result
    finally:
        _call_state.reset(token)
