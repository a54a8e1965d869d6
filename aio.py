"""Running a coroutine from sync code, in one place (a training stage's rollouts, a sync model call,
a LangGraph node that awaits): ``run_sync``."""

from __future__ import annotations

import asyncio
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
