"""An informer: list, then watch, into a local cache; and list again whenever the watch ends.

The cache lets the reconcile read without calling the API server. The watch keeps the cache fresh
with one long request instead of polling. A watch does not last forever: the server closes it after
its timeout, a network blip cuts it, and a watch that starts from a resourceVersion the server has
already forgotten answers 410 Gone. Events that happened while no watch was open are lost, so the
only safe recovery is to list again and compare the fresh list with the cache. By default this
informer always re-lists, which is simple and correct, at the cost of one list per watch. client-go
instead resumes from the last resourceVersion it saw and re-lists only on 410; a watch loop passed
to run() does it that way (notebook 03's exercise relist-after-410 has the learner write one).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
import kr8s
from kr8s.asyncio import Api

from .model import Key, Obj, key_of


class WatchExpired(Exception):
    """The server said 410 Gone: it no longer has the history to resume this watch."""


#: A watch loop: given the informer and the resourceVersion of its first list, watch until the end.
WatchLoop = Callable[["Informer", str], Awaitable[None]]


@dataclass(frozen=True)
class Resource:
    version: str  # "v1" or "group/version"
    plural: str


class Informer:
    #: The exception watch() raises on 410 Gone, here so that a watch loop needs no imports.
    Expired = WatchExpired

    def __init__(
        self,
        api: Api,
        resource: Resource,
        on_change: Callable[[Obj], None],
        log: logging.Logger,
        namespace: str | None = None,
        label_selector: str | None = None,
        watch_timeout: int = 300,
    ) -> None:
        self.api = api
        self.resource = resource
        self.on_change = on_change
        self.log = log
        self.namespace = namespace
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.cache: dict[Key, Obj] = {}
        self.lists = 0
        self.synced = asyncio.Event()
        self._watch_task: asyncio.Task[None] | None = None
        self._dropped_for: float | None = None
        self._resource_version = ""
        self._looping = False  # a watch loop runs: after a drop, it resumes rather than re-lists
        self._was_dropped = False

    def _params(self) -> dict[str, str]:
        return {"labelSelector": self.label_selector} if self.label_selector else {}

    async def run(self, watch_loop: WatchLoop | None = None) -> None:
        """List and watch until cancelled. Without a watch loop, each pass lists (replacing the cache)
        and then watches. A watch loop takes over after the first list: client-go's way, it may resume
        from the last resourceVersion instead of listing again."""
        if watch_loop is not None:
            await self._run_loop(watch_loop)
            return
        while True:
            try:
                resource_version = await self.relist()
                started = time.monotonic()
                await self.watch(resource_version)
                if not self._was_dropped:
                    self.log.info(
                        "%s: watch ended after %.1fs (closed by the server); re-listing",
                        self.resource.plural,
                        time.monotonic() - started,
                    )
            except WatchExpired:
                self.log.info("%s: re-listing after 410 Gone", self.resource.plural)
            except (kr8s.ServerError, httpx.HTTPError, kr8s.APITimeoutError) as error:
                self.log.warning("%s: list failed (%s); retrying in 1s", self.resource.plural, error)
                await asyncio.sleep(1)

    async def _run_loop(self, watch_loop: WatchLoop) -> None:
        while True:  # the first list, retried until it works
            try:
                resource_version = await self.relist()
                break
            except (kr8s.ServerError, httpx.HTTPError, kr8s.APITimeoutError) as error:
                self.log.warning("%s: list failed (%s); retrying in 1s", self.resource.plural, error)
                await asyncio.sleep(1)
        name = getattr(watch_loop, "__name__", "the watch loop")
        self._looping = True
        self.log.info("%s: watching with %s from resourceVersion %s", self.resource.plural, name, resource_version)
        try:
            await watch_loop(self, resource_version)
        except asyncio.CancelledError:
            raise
        except Exception:  # a learner's loop: say why it stopped, in the controller's log
            self.log.exception("%s: %s failed; this informer sees no more changes", self.resource.plural, name)
            return
        self.log.warning("%s: %s returned; this informer sees no more changes", self.resource.plural, name)

    async def _stay_disconnected(self, then: str) -> None:
        outage, self._dropped_for = self._dropped_for or 0.0, None
        self.log.info("%s: watch dropped; staying disconnected for %.1fs", self.resource.plural, outage)
        await asyncio.sleep(outage)
        self.log.info("%s: reconnecting: %s", self.resource.plural, then)

    def drop_watch(self, outage: float) -> None:
        """Cut the open watch from the client's side and stay away for `outage` seconds, the way a
        network partition would. Used by the lab to show that a re-list repairs the cache. When no
        watch is open (a re-list is under way), the next one is dropped before it starts."""
        self._dropped_for = outage
        if self._watch_task is not None and not self._watch_task.done():
            self._watch_task.cancel()

    async def relist(self) -> str:
        """List everything (in pages), replace the cache, and report every key that differs."""
        items: dict[Key, Obj] = {}
        params = self._params() | {"limit": "250"}
        while True:
            async with self.api.call_api(
                "GET",
                version=self.resource.version,
                url=self.resource.plural,
                namespace=self.namespace,
                params=params,
            ) as response:
                page = response.json()
            for item in page.get("items", []):
                items[key_of(item)] = item
            resource_version = page["metadata"]["resourceVersion"]
            if not page["metadata"].get("continue"):
                break
            params["continue"] = page["metadata"]["continue"]
        old, self.cache = self.cache, items
        new = [k for k in items if k not in old]
        changed = [k for k in items if k in old and _rv(old[k]) != _rv(items[k])]
        gone = [k for k in old if k not in items]
        self.lists += 1
        self.log.info(
            "%s: listed %d at resourceVersion %s (%d new, %d changed, %d gone since the cache)",
            self.resource.plural,
            len(items),
            resource_version,
            len(new),
            len(changed),
            len(gone),
        )
        for key in new + changed:
            self.on_change(items[key])
        for key in gone:
            self.on_change(old[key])
        self.synced.set()
        return str(resource_version)

    async def watch(self, resource_version: str) -> str:
        """Apply watch events to the cache from `resource_version` until the stream ends, and return
        the last resourceVersion seen (of an event or a bookmark), where a next watch can resume.

        It returns when the server closes the stream, when the watch was dropped (after the outage),
        or after a failed request (a second later). It raises WatchExpired on 410 Gone: there is
        nothing to resume from then."""
        self._resource_version = resource_version
        self._was_dropped = False
        if self._dropped_for is not None:  # the drop came while no watch was open
            self._was_dropped = True
            await self._stay_disconnected(self._next_step())
            return resource_version
        self._watch_task = asyncio.create_task(self._stream(resource_version))
        try:
            await self._watch_task
        except asyncio.CancelledError:
            if self._dropped_for is None:
                raise  # the informer itself is being stopped
            self._was_dropped = True
            await self._stay_disconnected(self._next_step())
        except kr8s.ServerError as error:
            if status_code(error) == 410:
                self._expired(resource_version, str(error))
            self.log.warning("%s: watch failed (%s); again in 1s", self.resource.plural, error)
            await asyncio.sleep(1)
        except (httpx.HTTPError, kr8s.APITimeoutError) as error:
            self.log.warning("%s: watch failed (%s); again in 1s", self.resource.plural, error)
            await asyncio.sleep(1)
        return self._resource_version

    def _next_step(self) -> str:
        return f"resuming the watch from resourceVersion {self._resource_version}" if self._looping else "re-listing"

    def _expired(self, resource_version: str, why: str) -> None:
        self.log.info(
            "%s: watch from resourceVersion %s answered 410 Gone (%s)", self.resource.plural, resource_version, why
        )
        raise WatchExpired(why)

    async def _stream(self, resource_version: str) -> None:
        params = self._params() | {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.watch_timeout),
        }
        async with self.api.call_api(
            "GET",
            version=self.resource.version,
            url=self.resource.plural,
            namespace=self.namespace,
            params=params,
            stream=True,
            timeout=None,
        ) as response:
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        self._expired(resource_version, obj.get("message", "Gone"))
                    raise kr8s.ServerError(obj.get("message", "watch error"), status=obj, response=None)
                self._resource_version = _rv(obj) or self._resource_version
                if kind == "BOOKMARK":
                    continue  # only moves the resourceVersion forward
                if kind == "DELETED":
                    self.cache.pop(key_of(obj), None)
                else:
                    self.cache[key_of(obj)] = obj
                self.on_change(obj)


def status_code(error: kr8s.ServerError) -> int | None:
    return error.response.status_code if error.response is not None else None


def _rv(obj: Obj) -> str:
    return str(obj["metadata"].get("resourceVersion", ""))
