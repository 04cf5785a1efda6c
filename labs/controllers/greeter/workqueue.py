"""A work queue of keys with de-duplication, in the manner of client-go's workqueue.

Why a queue of keys and not of events: ten quick edits to one object should cost one reconcile, not
ten. A key that is already waiting is not added twice. A key that changes while a worker is busy with
it is marked dirty and queued again when that worker calls done(), so one key is never reconciled by
two workers at once, and no change is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._waiting: set[K] = set()
        self._processing: set[K] = set()
        self._dirty: set[K] = set()
        self._failures: dict[K, int] = {}
        self.added = 0
        self.deduplicated = 0

    def add(self, key: K) -> None:
        self.added += 1
        if key in self._waiting or key in self._dirty:
            self.deduplicated += 1
            return
        if key in self._processing:
            self._dirty.add(key)
            return
        self._waiting.add(key)
        self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue the key again later, e.g. to retry after an error without a hot loop."""
        asyncio.get_running_loop().call_later(delay, self.add, key)

    async def get(self) -> K:
        key = await self._queue.get()
        self._waiting.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def retry_delay(self, key: K) -> float:
        """Exponential back-off per key: 0.2 s, 0.4 s, ... capped at 10 s."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        return min(0.1 * 2**failures, 10.0)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def __len__(self) -> int:
        return len(self._waiting)
