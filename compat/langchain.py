"""LangChain: the direct model call and the runnable bindings (``coevo.compat`` lists each reach and its
reason)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from langchain_core.callbacks import AsyncCallbackManager
from langchain_core.globals import get_llm_cache
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableBinding, ensure_config
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.utils.uuid import uuid7

# --- the direct model call ----------------------------------------------------------------------

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


# --- runnable bindings --------------------------------------------------------------------------


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
