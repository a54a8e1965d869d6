"""One policy served by several OpenAI-compatible servers (docs/design.md, Scale): spread the calls,
cool a failing server down, retry its requests on a healthy one.

``RouterChatModel`` holds one ``LiteLLMChatModel`` per server (a LiteLLM Router model list: the
same model on N ``api_base`` s) and routes each call itself, as a circuit breaker per server:

- **closed** (the server has answered): it takes any number of calls; a call goes to the server
  with the fewest calls in flight (ties in turn);
- **open** (it failed with a transient error: connection refused, timeout, 429, 5xx): it takes no
  call for ``cooldown_s`` seconds, and the failed request is retried at once on another server;
- **half-open** (never answered yet, or its cooldown is over): it takes exactly one call, the probe;
  success closes it, failure opens it again.

So a dead server receives at most one request per cooldown window, however many rollouts run at
once. Why not ``litellm.Router``: it cools a deployment down only after the failures of the calls
already sent to it, so a burst of concurrent rollouts sends many requests to a dead server before
the first failure is counted (measured: 6–8 of the first 16 concurrent calls went to a closed port;
``benchmarks/bench_servers.py``, row (d)). A permanent error (400, 401, ...) is the request's fault and is
raised at once. Every failure is logged (logger ``coevo.models.router``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

from coevo.aio import run_sync
from coevo.models.litellm_model import LiteLLMCallError, LiteLLMChatModel, is_transient

log = logging.getLogger(__name__)
POLL_S = 0.02
"""How often a call that found every server busy probing or cooling down looks again (seconds)."""


@dataclass
class ServerHealth:
    """One server's breaker state: ``cooled_until`` (``time.monotonic`` seconds; open until then),
    ``proven`` (answered since its last failure: closed), ``probing`` (its one half-open call is out),
    ``in_flight`` calls, and counters ``attempts``/``failures``/``successes``."""

    name: str
    cooled_until: float = 0.0
    proven: bool = False
    probing: bool = False
    in_flight: int = 0
    attempts: int = 0
    failures: int = 0
    successes: int = 0


class ServerPool:
    """The breakers of a router's servers (shared by every copy of the router: ``bind_tools``,
    decoding overrides). Thread-safe: sync calls may come from several threads."""

    def __init__(self, names: Sequence[str], cooldown_s: float) -> None:
        self.servers = [ServerHealth(n) for n in names]
        self.cooldown_s = cooldown_s
        self._lock = threading.Lock()
        self._turn = 0

    def acquire(self, avoid: set[int]) -> int | None:
        """The index of the server the next attempt goes to, marked in flight; None when every
        server is cooling down or probing (wait and ask again). ``avoid``: servers that already
        failed this request, used only when no other server is open to it."""
        now = time.monotonic()
        with self._lock:
            ready = [i for i, s in enumerate(self.servers)
                     if s.cooled_until <= now and (s.proven or not s.probing)]
            if not ready:
                return None
            ready = [i for i in ready if i not in avoid] or ready
            n = len(self.servers)
            i = min(ready, key=lambda j: (self.servers[j].in_flight, (j - self._turn) % n))
            self._turn = (i + 1) % n
            server = self.servers[i]
            if not server.proven:
                server.probing = True
            server.in_flight += 1
            server.attempts += 1
            return i

    def release(self, i: int, error: BaseException | None) -> bool:
        """Record how the attempt on server ``i`` ended; True when ``error`` opened (cooled) it."""
        with self._lock:
            server = self.servers[i]
            server.in_flight -= 1
            server.probing = False
            if error is None:
                server.proven, server.successes = True, server.successes + 1
                return False
            server.failures += 1
            if not is_transient(error):
                return False
            server.proven = False
            server.cooled_until = time.monotonic() + self.cooldown_s
            return True

    def wait_s(self) -> float:
        """Seconds to sleep before asking again: until the next cooldown ends, at most ``POLL_S``."""
        now = time.monotonic()
        ends = [s.cooled_until - now for s in self.servers if s.cooled_until > now]
        return max(0.001, min([POLL_S, *ends]))


def _cause(err: LiteLLMCallError) -> BaseException:
    return err.__cause__ or err


class RouterChatModel(BaseChatModel):
    """A chat model whose calls go to one of several servers (see the module docstring).

    Fields: ``servers`` one ``LiteLLMChatModel`` per server (``max_retries=0``: the router retries);
    ``cooldown_s`` how long a server that failed with a transient error gets no call;
    ``max_attempts`` attempts per call across servers (default: servers + 2); ``wait_max_s`` how long a
    call waits for a server to come out of cooldown before it fails.

    Raises ``LiteLLMCallError`` when a call fails for good: a permanent error, ``max_attempts``
    transient failures, or no server open within ``wait_max_s``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    servers: list[LiteLLMChatModel] = Field(min_length=1)
    cooldown_s: float = 30.0
    max_attempts: int | None = None
    wait_max_s: float = 300.0
    _pool: ServerPool = PrivateAttr()

    def model_post_init(self, __context: Any) -> None:
        """Build the shared breakers (a copy made with ``model_copy`` keeps its original's)."""
        self._pool = ServerPool([s.api_base or s.model for s in self.servers], self.cooldown_s)

    @property
    def pool(self) -> ServerPool:
        """The servers' breaker states and counters."""
        return self._pool

    @property
    def _llm_type(self) -> str:
        return "coevo-router"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"servers": [s.api_base for s in self.servers], "model": self.servers[0].model}

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """A copy whose every server sends ``tools`` (``LiteLLMChatModel.bind_tools``); same breakers."""
        bound = [s.bind_tools(tools, tool_choice=tool_choice) for s in self.servers]
        copy = self.model_copy(update={"servers": bound})
        copy._pool = self._pool
        return copy.bind(**kwargs) if kwargs else copy

    def _attempts(self) -> int:
        return self.max_attempts or len(self.servers) + 2

    def _note(self, i: int, err: LiteLLMCallError, attempt: int) -> None:
        cause = _cause(err)
        opened = self._pool.release(i, cause)
        if not opened:
            raise err
        log.warning("server %s failed (%s: %s); cooled down for %.0f s, retrying on another server (attempt %d/%d)",
                    self._pool.servers[i].name, type(cause).__name__, str(cause)[:200], self.cooldown_s,
                    attempt, self._attempts())

    def _give_up(self, last: LiteLLMCallError | None, waited: bool) -> LiteLLMCallError:
        names = ", ".join(s.name for s in self._pool.servers)
        why = f"no server came out of cooldown within {self.wait_max_s:.0f} s" if waited else \
            f"{self._attempts()} attempts failed"
        err = LiteLLMCallError(f"every server of {self.servers[0].model!r} failed ({names}): {why}; last error: {last}",
                               self._attempts())
        err.__cause__ = _cause(last) if last else None
        return err

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return run_sync(self._agenerate(messages, stop, **kwargs))  # also from inside a running loop

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        failed: set[int] = set()
        last: LiteLLMCallError | None = None
        deadline = time.monotonic() + self.wait_max_s
        for attempt in range(1, self._attempts() + 1):
            while (i := self._pool.acquire(failed)) is None:
                if time.monotonic() > deadline:
                    raise self._give_up(last, True)
                await asyncio.sleep(self._pool.wait_s())
            try:
                result = await self.servers[i].acomplete(messages, stop, **kwargs)
            except LiteLLMCallError as err:
                self._note(i, err, attempt)
                failed.add(i)
                last = err
                continue
            except BaseException as err:
                self._pool.release(i, err)
                raise
            self._pool.release(i, None)
            return result
        raise self._give_up(last, False)
