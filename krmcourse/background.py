"""Async code run from sync code, a notebook's included: one private event loop in a daemon thread.

A notebook's kernel already runs an event loop, so ``asyncio.run`` cannot be called from a cell. The
course's async helpers (the watch recorder of the timeline widget, the fault proxy) each run their
``main`` coroutine here instead: :meth:`LoopThread.start` returns once ``main`` says it is ready (or
raises what stopped it), :meth:`LoopThread.call` runs a coroutine on that loop from any thread, and
:meth:`LoopThread.stop` cancels ``main`` and waits for the thread to end.

>>> async def main(ready):                      # doctest: +SKIP
...     server = await serve()
...     ready()
...     await asyncio.Event().wait()            # until stop() cancels it
>>> loop = LoopThread("server").start(main)     # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
Main = Callable[[Callable[[], None]], Coroutine[Any, Any, None]]


class LoopThread:
    def __init__(self, name: str) -> None:
        self.name = name
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None

    def start(self, main: Main, timeout: float = 30) -> LoopThread:
        """Run ``main(ready)`` in the thread; return once it calls ``ready()``.

        Raises RuntimeError, with the cause, when ``main`` fails or ends first, or ``timeout`` passes."""
        self._thread = threading.Thread(target=self._run, args=(main,), name=self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._error is not None:
            self.stop()
            raise RuntimeError(f"{self.name} did not start: {self._error or f'not ready after {timeout:.0f} s'}") \
                from self._error
        return self

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run ``coro`` on the thread's loop and return its result (from any other thread)."""
        if self._loop is None or not self.running():
            coro.close()
            raise RuntimeError(f"{self.name} is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 10) -> None:
        if self._loop is not None and self._task is not None and self.running():
            self._loop.call_soon_threadsafe(self._task.cancel)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self, main: Main) -> None:
        async def guarded() -> None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
            try:
                await main(self._ready.set)
            except asyncio.CancelledError:
                pass
            finally:
                if not self._ready.is_set():
                    self._error = self._error or RuntimeError(f"{self.name} ended before it was ready")

        try:
            asyncio.run(guarded())
        except BaseException as error:  # noqa: BLE001 - reported to start(); a daemon thread must not die loudly
            self._error = error
        finally:
            self._ready.set()
