"""Every reach under a framework's public API, in one module, each with its reason.

Each lives here and nowhere else in coevo, one place to read when a framework changes (a long module by
that rule); ``tests/unit/test_compat.py`` (LangGraph, LangChain) and ``tests/unit/test_compat_training.py``
(TRL, transformers) check that each behaves like the public path it replaces, on the versions
``pyproject.toml`` bounds (langgraph 1.2, langchain-core 1.8, trl 1.16, transformers 5.24): widen a bound
only after those tests pass on the new release.

- ``node`` / ``route``: LangGraph's own node wrapper ``RunnableCallable`` with an async twin and no
  tracing per step (``langgraph._internal``).
- ``bind_context``: a compiled graph that carries its run context (LangGraph has no public way yet).
- ``with_checkpointer`` / ``state_schemas``: a strategy's graph, compiled once at import, given a run's
  checkpointer (``Pregel.copy``) and its state schemas (the compiled graph's ``builder``).
- ``areply``: an unobserved chat model's ``_agenerate`` called directly (``BaseChatModel`` private).
- ``arun_state``: a compiled graph's nodes, routers and reducers run in a plain loop (reads the
  builder's ``nodes``/``branches``/``edges``, which LangGraph does not document).
- ``bind_tools_within`` / ``unbind`` / ``innermost``: a ``RunnableBinding``'s ``bound``/``kwargs``/``config`` fields.
- ``detached``: LangChain's context variable of the parent runnable config (``var_child_runnable_config``).
- ``GRPOBatchHook``: TRL's ``GRPOTrainer._generate_and_score_completions`` answered by coevo's
  own batch, with TRL's private per-token log-probs and metric store; its private scoring
  (``_get_per_token_logps_and_entropies``) optionally served by a packed scorer.
- ``route_tensorboard``: the ``logging_dir`` attribute of transformers' ``TensorBoardCallback``.
- ``vf_config_type``, ``vf_bare_env``, ``vf_trace_stops``, ``vf_tool_methods``, ``vf_tool_call``: verifiers' v1
  internals the verifiers adapter (``coevo.envs.verifiers_adapter``) plays a taskset through without
  verifiers' harness, runtime and MCP servers: a plugin class's config type, an ``Env`` made without its
  harness and runtime loading, a task's trace-typed ``@vf.stop`` predicates, and a ``Toolset``'s tools
  called in process on the rollout's state (verifiers 0.4.0).
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Annotated, Any, Callable, Iterator, get_origin, get_type_hints

from langchain_core.callbacks import AsyncCallbackManager
from langchain_core.globals import get_llm_cache
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig, ensure_config
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.utils.uuid import uuid7
from langgraph._internal._runnable import RunnableCallable
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

# --- nodes without per-step overhead --------------------------------------------------------------


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


# --- a graph bound to its context -----------------------------------------------------------------


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

# --- the plain-loop runner ------------------------------------------------------------------------

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


# --- the direct model call ------------------------------------------------------------------------

_CALL_ONLY = ("ls_structured_output_format", "structured_output_format")  # for LangChain's tracer, not the model


def _unobserved(model: BaseChatModel, messages: list[BaseMessage], kwargs: dict[str, Any]) -> bool:
    """True when ``model.ainvoke`` would attach no callback handler (none in the run config, on the
    model, from LangSmith tracing or a configure hook), use no cache or rate limiter, not stream,
    and pass ``messages`` on unchanged (all plain-text content: list content is normalised first)."""
    if model.cache not in (None, False) or model.rate_limiter is not None or model.output_version == "v1":
        return False
    if any(not isinstance(m.content, str) for m in messages):
        return False
    if kwargs.get("stream") or getattr(model, "streaming", False) is True:
        return False
    if model.cache is None and get_llm_cache() is not None:
        return False
    config = ensure_config()
    manager = AsyncCallbackManager.configure(config.get("callbacks"), model.callbacks, model.verbose,
                                             config.get("tags"), model.tags, config.get("metadata"), model.metadata)
    return not manager.handlers


async def areply(model: Runnable, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
    """The model's reply to ``messages``: what ``await model.ainvoke(messages, **kwargs)`` returns.

    For a LangChain ``BaseChatModel`` that nothing observes (``_unobserved``: no callback handlers,
    cache, rate limiter or streaming) this calls the model's ``_agenerate`` directly and applies
    the same response-metadata merge as ``BaseChatModel._agenerate_with_cache``: the same reply,
    without ``ainvoke``'s per-call callback-manager set-up and the ``asyncio.gather`` task it
    wraps every call in. That task costs two event-loop hops per call, each queued behind every
    other ready rollout: at 32 concurrent rollouts of a 50 ms model it cost ~11 points of engine
    throughput (``docs/benchmarks/engine.md``, row (a); diagnostic row "without the direct model call").
    Anything else goes through ``ainvoke`` (so LangSmith traces, ``astream_events`` and Studio
    streaming still see every call). A reply without an ``id`` gets one, as under ``ainvoke``
    (``lc_run--<uuid7>-0``), so the recorded call and the state hold the same message (the archive's
    prefix sharing needs it); the structured-output kwargs ``ainvoke`` keeps for its tracer are
    dropped, as it drops them. Raises whatever the model raises.
    """
    if not isinstance(model, BaseChatModel) or not _unobserved(model, messages, kwargs):
        return await model.ainvoke(messages, **kwargs)
    for key in _CALL_ONLY:
        kwargs.pop(key, None)
    stop = kwargs.pop("stop", None)
    result = await model._agenerate(messages, stop=stop, **kwargs)
    generation = result.generations[0]
    message = generation.message
    info = {k: v for k, v in (generation.generation_info or {}).items() if k != "lc_gateway_metadata"}
    llm_output = result.llm_output if len(result.generations) == 1 and result.llm_output else {}
    message.response_metadata = {**llm_output, **info, **message.response_metadata}
    if message.id is None:
        message.id = f"lc_run--{uuid7()}-0"
    return message  # type: ignore[return-value]


# --- runnable bindings ----------------------------------------------------------------------------


def bind_tools_within(model: Runnable, schemas: list[dict]) -> Runnable:
    """``model.bind_tools(schemas)``, keeping the wrappers around the chat model (``.bind(stop=...)``,
    ``with_config``, ``with_retry``). Why: a ``RunnableBinding`` forwards ``bind_tools`` to the model
    it wraps and drops its own kwargs and config (or fails, for ``with_retry``); this rebuilds each
    wrapper around the tool-bound model (``RunnableBindingBase.bound``, a pydantic field)."""
    if isinstance(model, RunnableBindingBase):  # RunnableBinding, RunnableRetry
        return model.model_copy(update={"bound": bind_tools_within(model.bound, schemas)})
    return model.bind_tools(schemas)  # type: ignore[attr-defined]


def unbind(model: Runnable) -> tuple[Runnable, dict[str, Any]]:
    """``(target, kwargs)`` such that ``target.invoke(x, **kwargs)`` is ``model.invoke(x)``: a plain
    kwargs binding (``model.bind(**kwargs)``, no config) is opened to the model it wraps, anything
    else is ``(model, {})``. Why: calling the bound model directly skips the binding's config merge
    on every model call of every rollout (``harnesses.engine.EngineContext``)."""
    plain = isinstance(model, RunnableBinding) and not model.config and not model.config_factories
    return (model.bound, dict(model.kwargs)) if plain else (model, {})


def innermost(model: Runnable) -> Runnable:
    """The chat model inside every wrapper around ``model`` (``.bind``, ``with_config``, ``with_retry``).
    Why: the context-budget check asks the policy itself for its tokenizer and context length
    (``coevo.harnesses.fit.meter_of``), which no wrapper forwards (``RunnableBindingBase.bound``)."""
    while isinstance(model, RunnableBindingBase):
        model = model.bound
    return model


@contextmanager
def detached() -> Iterator[None]:
    """Run the block as a top-level LangChain/LangGraph call: no parent runnable config.

    Why: a graph invoked inside another graph's node inherits that run's config through the context
    variable ``var_child_runnable_config`` — its checkpointer too, so a user's agent graph rolled out
    inside the meta loop's ``train`` or ``validate`` node would checkpoint as the run's subgraph (and,
    on the training stage's own event loop, fail on the checkpointer's lock, which is bound to the
    driver's loop). ``harnesses.agent_run`` runs the user's graph in this block. LangChain has no
    public way to start a fresh root run from inside a runnable.
    """
    token = var_child_runnable_config.set(None)
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


# --- TRL: GRPOTrainer batches built from coevo's rollouts -----------------------------------------


class GRPOBatchHook:
    """A mixin for ``trl.GRPOTrainer`` (first base: ``class T(GRPOBatchHook, GRPOTrainer)``) whose
    generation batch is built by the subclass's ``generation_batch(inputs) -> dict`` instead of
    TRL's own generation; TRL keeps the loss, optimiser, accumulation, logging and saving.

    Why: TRL's public ``rollout_func`` must return one completion per prompt, and a harness
    trajectory is several training rows (``coevo.training.grpo.trainer``). The override point is
    ``_generate_and_score_completions`` (private; ``_prepare_inputs`` calls it once per generation
    batch and splits what it returns into micro-batches): its output keys are what ``_compute_loss``
    reads (``prompt_ids``/``prompt_mask``, ``completion_ids``/``completion_mask``, ``tool_mask``,
    ``advantages`` of shape ``(B,)`` or ``(B, T)``, ``num_items_in_batch``, optionally
    ``old_per_token_logps`` and ``sampling_per_token_logps``). ``policy_logps`` and ``log_metric``
    reach TRL's per-token log-probs and metric store, so the batch is scored and logged exactly as
    TRL's own. TRL's scoring (``_get_per_token_logps_and_entropies``, private, called by its loss)
    may be served by a ``packed_scorer`` instead. Equivalence tests: ``test_compat_training.py``
    (loss and gradients equal TRL's own ``rollout_func`` batch for the same tokens and advantages;
    the packed scorer's log-probs, entropies, loss and gradients equal TRL's row-by-row ones).
    """

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        return self.generation_batch(inputs)  # type: ignore[attr-defined]

    packed_scorer: Any = None
    """``None``, or ``scorer(model, input_ids, attention_mask, completion_length, compute_entropy) ->
    (logps, entropies | None)`` that TRL's scoring calls (``_get_per_token_logps_and_entropies``) go
    to instead of TRL's row-by-row forward (``coevo.training.grpo.packing.packed_logps``)."""

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: Any, attention_mask: Any,
                                           logits_to_keep: int, batch_size: int | None = None,
                                           compute_entropy: bool = False, compute_aux_loss: bool = False,
                                           **multimodal: Any) -> Any:
        # every log-prob TRL's loss and its old-policy scoring use comes through here; text-only
        # batches go to the packed scorer when there is one (equivalence: test_compat_training.py)
        trainer: Any = self
        if (self.packed_scorer is None or compute_aux_loss
                or any(value is not None for value in multimodal.values())):
            return super()._get_per_token_logps_and_entropies(  # type: ignore[misc]
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **multimodal)
        with trainer.accelerator.autocast():
            logps, entropies = self.packed_scorer(model, input_ids, attention_mask, logits_to_keep, compute_entropy)
        return logps, entropies, None

    def policy_logps(self, input_ids: Any, attention_mask: Any, completion_length: int) -> Any:
        """Per-token log-probs ``(B, completion_length)`` of the last ``completion_length`` tokens of
        ``input_ids`` ``(B, T)`` under the trainer's current model, computed as TRL's loss computes
        them (temperature-scaled, in micro-batches of ``per_device_train_batch_size``), without grad."""
        import torch

        trainer: Any = self
        with torch.no_grad():
            logps, _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.model, input_ids, attention_mask, completion_length,
                batch_size=trainer.args.per_device_train_batch_size)
        return logps

    def log_metric(self, name: str, value: float) -> None:
        """Add ``value`` to metric ``name`` of the current mode (train/eval): TRL logs each metric's
        mean over the values added since its last log (``trainer.state.log_history``)."""
        trainer: Any = self
        trainer._metrics["train" if trainer.model.training else "eval"][name].append(float(value))


# --- transformers: the TensorBoard callback's folder ----------------------------------------------


def route_tensorboard(trainer: Any, logging_dir: str | None) -> None:
    """Point the ``TensorBoardCallback`` that ``report_to="tensorboard"`` added to ``trainer`` at
    ``logging_dir`` (nothing without that callback or a directory). Why: transformers 5 dropped
    ``TrainingArguments.logging_dir``; its callback reads its own ``logging_dir`` attribute when
    training begins (set from ``$TENSORBOARD_LOGGING_DIR`` at construction, which would be a
    process-wide side channel for a per-stage folder)."""
    if logging_dir is None:
        return
    from transformers.integrations import TensorBoardCallback

    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback):
            callback.logging_dir = logging_dir


# --- verifiers v1: a taskset played without verifiers' harness and runtime ------------------------


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
