"""Running a coroutine from sync code, in one place (a training stage's rollouts, a sync model call,
a LangGraph node that awaits): ``run_sync``; and ``LoopThread``, one event loop kept in its own thread
for coroutines that share state across calls (a verifiers env's tool servers and games)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, also when an event loop is already running
    in this thread (then it runs on a fresh loop in a worker thread); returns its result and raises
    what it raises."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


class LoopThread:
    """One event loop in a daemon thread named ``name``: coroutines run there from sync code (``run``), also
    when the caller is itself inside a running loop, and keep the loop's state between calls. ``close``
    (idempotent) stops the loop and ends the thread."""

    def __init__(self, name: str, timeout_s: float | None = None) -> None:
        self.timeout_s = timeout_s
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and return its result (raises what it raises; ``TimeoutError`` after
        ``timeout_s`` seconds when set)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout_s)

    def close(self) -> None:
        """Stop the loop and wait (up to 5 s) for its thread to end; safe to call twice."""
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            if threading.current_thread() is not self.thread:
                self.thread.join(timeout=5)
