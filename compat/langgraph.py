"""LangGraph: nodes and routers without per-step tracing, a graph bound to its context, and the
plain-loop runner of a compiled graph's own nodes (``coevo.compat`` lists each reach and its reason)."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Callable, get_origin, get_type_hints

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph._internal._runnable import RunnableCallable
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

# --- nodes without per-step overhead --------------------------------------------------------


def node(func: Callable[..., Any], afunc: Callable[..., Any] | None = None) -> Runnable:
    """A graph node running ``func`` under ``invoke`` and ``afunc`` (or ``func``) under ``ainvoke``,
    with LangGraph's usual injection of ``runtime``/``config`` parameters.

    Why: ``StateGraph.add_node(func)`` takes one callable; a sync one hops to a worker thread at every
    step under ``ainvoke`` and an async one cannot run under ``invoke``. LangGraph's ``RunnableCallable``
    takes both, and ``trace=False`` skips a callback-manager set-up per step. Benchmark row (b)
    (coevo's compiled graph 0.67× ``create_react_agent``) and every Studio / traced rollout.
    """
    return RunnableCallable(func, afunc, name=func.__name__, trace=False)


def route(fn: Callable[[Any], str]) -> Runnable:
    """A conditional-edge router with an async twin and no tracing per call (as ``node``; LangGraph
    traces every router and runs a sync one in a worker thread under ``ainvoke``). Row (b)."""

    async def arun(state: Any) -> str:
        return fn(state)

    return RunnableCallable(fn, arun, name=fn.__name__, trace=False)


# --- a graph bound to its context -------------------------------------------------------------


class ContextBoundGraph(CompiledStateGraph):
    """A compiled graph whose runs get ``bound_context`` as ``runtime.context`` unless the caller
    passes a (non-empty) ``context``. See ``bind_context``."""

    def __init__(self, *, bound_context: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bound_context = bound_context

    def stream(self, input: Any, config: RunnableConfig | None = None, *, context: Any = None, **kwargs: Any) -> Any:
        """``CompiledStateGraph.stream`` with the bound context (``invoke`` and ``stream_events`` go through here)."""
        return super().stream(input, config, context=context or self.bound_context, **kwargs)

    def astream(self, input: Any, config: RunnableConfig | None = None, *, context: Any = None,
                **kwargs: Any) -> Any:
        """``CompiledStateGraph.astream`` with the bound context (``ainvoke`` and ``astream_events`` go
        through here)."""
        return super().astream(input, config, context=context or self.bound_context, **kwargs)

    def get_context_jsonschema(self) -> dict[str, Any] | None:
        """``None``: the context is bound when the graph is built, so a caller (Studio) has nothing to set."""
        return None


def bind_context(graph: CompiledStateGraph, context: Any, **update: Any) -> CompiledStateGraph:
    """A copy of ``graph`` (sharing its compiled nodes) whose runs see ``context`` as ``runtime.context``
    when the caller passes none; ``update`` sets other attributes of the copy (``config``, ``name``).

    Why: the harness graph is compiled once and bound per episode (its tools are per episode), and
    apps and LangGraph Studio call ``graph.invoke(input)`` without a context. LangGraph 1.2 has no
    public graph-level context (https://github.com/langchain-ai/langgraph/issues/7990); its server seeds a private
    configurable key instead, and sends ``context={}`` on every run, which would replace a context seeded that
    way. A copy is made the way ``Pregel.copy`` makes one (its ``__dict__`` as constructor arguments). Compiling
    once per spec rather than per rollout took row (a) from 20 % to 81 % of ideal (commit
    ``6065c6e``).
    """
    attrs = {k: v for k, v in vars(graph).items() if k not in ("__orig_class__", "bound_context")}
    return ContextBoundGraph(**{**attrs, **update}, bound_context=context)



def state_schemas(graph: CompiledStateGraph) -> list[Any]:
    """The state schemas of the compiled ``graph``'s builder (``StateGraph.schemas``: state, input,
    output and node-input types), from which a checkpointer's deserialisation allow-list is made
    (``coevo.meta.state.state_models``). Why: read from the compiled graph's ``builder`` attribute,
    which LangGraph does not document, so the graph need not be built again for them."""
    return list(graph.builder.schemas)


def with_checkpointer(graph: CompiledStateGraph, checkpointer: Any) -> CompiledStateGraph:
    """A copy of the compiled ``graph`` (sharing its compiled nodes) that checkpoints with ``checkpointer``.

    Why: a strategy's module compiles its graph once, at import (Studio serves that one); a run needs it
    with a checkpointer, which only ``compile`` takes, and compiling the builder again would repeat every
    node's and subgraph's compilation. The copy is made by ``Pregel.copy`` (undocumented), as
    ``bind_context`` makes its copy; ``compile`` does nothing with the checkpointer but store it."""
    return graph.copy(update={"checkpointer": checkpointer})

# --- the plain-loop runner ----------------------------------------------------------------------

Step = tuple[Callable[..., Any], bool, bool, Callable[[Any], str]]  # fn, is async, takes runtime, next node


@lru_cache(maxsize=64)
def _plan(builder: Any) -> tuple[str, dict[str, Step], dict[str, Callable[[Any, Any], Any]]]:
    """The entry node, each node's step and the state's reducers, read once from a ``StateGraph``
    whose nodes come from ``node`` and whose routers from ``route`` (or plain edges)."""
    entry = next(end for start, end in builder.edges if start == START)
    steps: dict[str, Step] = {}
    for name, spec in builder.nodes.items():
        runnable = spec.runnable
        if not isinstance(runnable, RunnableCallable):
            raise TypeError(f"arun_state runs nodes made with coevo.compat.node; {name!r} is a "
                            f"{type(runnable).__name__}")
        fn, is_async = (runnable.afunc, True) if runnable.afunc is not None else (runnable.func, False)
        steps[name] = (fn, is_async, "runtime" in runnable.func_accepts, _next(builder, name))
    hints = get_type_hints(builder.state_schema, include_extras=True)
    reducers = {k: h.__metadata__[0] for k, h in hints.items() if get_origin(h) is Annotated}
    return entry, steps, reducers


def _next(builder: Any, name: str) -> Callable[[Any], str]:
    branches = list(builder.branches.get(name, {}).values())
    if branches:
        (branch,) = branches
        path, ends = branch.path.func, branch.ends
        return (lambda state: ends[path(state)]) if ends else path
    (target,) = [end for start, end in builder.edges if start == name]
    return lambda state: target


async def arun_state(graph: CompiledStateGraph, context: Any, inputs: dict[str, Any],
                     recursion_limit: int = 25) -> dict[str, Any]:
    """Run ``graph`` on ``inputs`` with ``context`` as ``runtime.context``, with LangGraph's state
    semantics but without its Pregel engine; returns the final state, as ``graph.ainvoke(inputs,
    {"recursion_limit": recursion_limit}, context=context)`` would (message ids aside).

    The nodes, routers and reducers are the compiled graph's own (read from its builder: nodes made
    with ``node``, conditional edges with ``route``, one edge or branch out of each node). Why:
    Pregel costs ~0.2 ms of CPU per superstep (17 supersteps in a 4-call rollout), which alone
    exceeds the engine's CPU budget at 32 concurrent 50 ms model calls: the plain loop took row (a)
    from 20 % to 81–86 % of ideal (commit ``6065c6e``) and ``arun_rollout`` to 0.71 ms (row (b)
    diagnostics). Raises ``GraphRecursionError`` past ``recursion_limit`` node steps, like the graph.
    """
    entry, steps, reducers = _plan(graph.builder)
    runtime = Runtime(context=context)
    state: dict[str, Any] = {**{k: [] for k in reducers}, **inputs}
    name = entry
    for _ in range(recursion_limit):
        fn, is_async, takes_runtime, after = steps[name]
        update = fn(state, runtime) if takes_runtime else fn(state)
        if is_async:
            update = await update
        state = dict(state)
        for key, value in (update or {}).items():
            state[key] = reducers[key](state[key], value) if key in reducers else value
        name = after(state)
        if name == END:
            return state
    raise GraphRecursionError(f"Recursion limit of {recursion_limit} reached without hitting a stop condition "
                              f"(graph {graph.name!r}): the budgets should end every episode first; this is a bug")
