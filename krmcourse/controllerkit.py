"""A controller toolkit small enough to read in one sitting: a counting client, an informer, a queue.

Each piece is what client-go or controller-runtime does for a Go controller, minus what these labs
do not need. Every request goes through :class:`Client`, which counts it in the controller's own
Prometheus metrics, so the controller can say how much load it makes and kube-apiserver's /metrics
can confirm it. The good-citizens lab's Widget controller is built on it, and the multi-cluster lab's
fleet controller uses it with one Client and one cache per cluster.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import signal
import sys
import threading
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

from kr8s._exceptions import ServerError
from prometheus_client import Counter, Gauge, start_http_server

REQUESTS = Counter(
    "controller_api_requests",
    "Requests this controller sent to an API server",
    ["cluster", "verb", "resource", "subresource"],
)
RESPONSE_BYTES = Counter(
    "controller_api_response_bytes",
    "Bytes of responses and watch streams received",
    ["cluster", "verb", "resource"],
)
WATCH_EVENTS = Counter("controller_watch_events", "Watch events received", ["cluster", "resource", "type"])
FILTERED = Counter(
    "controller_events_filtered", "Events dropped by a predicate before the queue", ["resource"]
)
RECONCILES = Counter("controller_reconciles", "Reconciles run", ["loop"])
CACHE_OBJECTS = Gauge("controller_cache_objects", "Objects held in the cache", ["cluster", "resource"])
CACHE_BYTES = Gauge(
    "controller_cache_bytes", "JSON size of the objects held in the cache", ["cluster", "resource"]
)
OPEN_WATCHES = Gauge("controller_open_watches", "Watch streams open right now", ["cluster", "resource"])

#: Ask for PartialObjectMetadata instead of full objects: names, labels, owners, but no spec or data.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


#: One line at a time: a controller logs from its event loop and from threads (an HTTP callback, say).
_LOG_LOCK = threading.Lock()


def log(*parts: object) -> None:
    """Write one line to the controller's log, stamped to the millisecond; safe from any thread.

    The line goes out in one write. ``print`` writes each part, and the newline, separately, so two
    threads printing at once can run their lines together, and a test counting lines miscounts.
    """
    moment = time.time()
    line = " ".join([time.strftime("%H:%M:%S", time.localtime(moment)) + f".{int(moment % 1 * 1000):03d}",
                     *map(str, parts)])
    with _LOG_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def serve_metrics() -> int:
    """Start the metrics endpoint on a free port and print its URL (the notebook reads it from the log)."""
    server, _ = start_http_server(0, addr="127.0.0.1")
    port = int(server.server_port)
    log(f"metrics: http://127.0.0.1:{port}/metrics")
    return port


class Conflict(Exception):
    """The API server answered 409: a stale resourceVersion, an existing name, or an apply conflict."""


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST API."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


CONFIGMAPS = Resource("", "v1", "configmaps")
SECRETS = Resource("", "v1", "secrets")


class Client:
    """A thin, counting wrapper over one kr8s client (one cluster). Always built with an explicit api."""

    def __init__(self, api: Any, cluster: str = "local") -> None:
        self.api = api
        self.cluster = cluster

    def _count(self, verb: str, res: Resource, subresource: str = "") -> None:
        REQUESTS.labels(self.cluster, verb, res.plural, subresource).inc()

    async def _call(
        self,
        method: str,
        verb: str,
        res: Resource,
        namespace: str | None,
        name: str = "",
        subresource: str = "",
        **kwargs: Any,
    ) -> dict[str, Any]:
        url = "/".join(p for p in (res.plural, name, subresource) if p)
        self._count(verb, res, subresource)
        try:
            async with self.api.call_api(
                method,
                version=res.api_version,
                base="/apis" if res.group else "/api",
                namespace=namespace if res.namespaced else None,
                url=url,
                **kwargs,
            ) as response:
                RESPONSE_BYTES.labels(self.cluster, verb, res.plural).inc(len(response.content))
                return dict(response.json())
        except ServerError as exc:
            if exc.response is not None and exc.response.status_code == 409:
                raise Conflict(str(exc)) from exc
            raise

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        metadata_only: bool = False,
    ) -> dict[str, Any]:
        params = {"labelSelector": label_selector} if label_selector else {}
        headers = {"Accept": METADATA_LIST} if metadata_only else {}
        return await self._call("GET", "LIST", res, namespace, params=params, headers=headers)

    async def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            return await self._call("GET", "GET", res, namespace, name)
        except ServerError as exc:
            if exc.response is not None and exc.response.status_code == 404:
                return None
            raise

    async def create(self, res: Resource, namespace: str | None, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", "POST", res, namespace, content=json.dumps(body))

    async def patch(
        self, res: Resource, namespace: str | None, name: str, patch: dict[str, Any], subresource: str = ""
    ) -> dict[str, Any]:
        """A JSON merge patch: send only what changes."""
        return await self._call(
            "PATCH",
            "PATCH",
            res,
            namespace,
            name,
            subresource,
            content=json.dumps(patch),
            headers={"Content-Type": "application/merge-patch+json"},
        )

    async def delete(self, res: Resource, namespace: str | None, name: str) -> bool:
        """Delete; False when it was already gone."""
        try:
            await self._call("DELETE", "DELETE", res, namespace, name)
        except ServerError as exc:
            if exc.response is None or exc.response.status_code != 404:
                raise
            return False
        return True

    async def watch(
        self,
        res: Resource,
        namespace: str | None,
        resource_version: str,
        label_selector: str | None = None,
        metadata_only: bool = False,
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield watch events until the server ends the stream (after timeoutSeconds) or the task is cancelled."""
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(random.randint(300, 600)),
        }
        if label_selector:
            params["labelSelector"] = label_selector
        headers = {"Accept": METADATA_ONE} if metadata_only else {}
        self._count("WATCH", res)
        OPEN_WATCHES.labels(self.cluster, res.plural).inc()
        try:
            async with self.api.call_api(
                "GET",
                version=res.api_version,
                base="/apis" if res.group else "/api",
                namespace=namespace if res.namespaced else None,
                url=res.plural,
                params=params,
                headers=headers,
                stream=True,
                timeout=None,
            ) as response:
                async for line in response.aiter_lines():
                    if not line:
                        continue
                    RESPONSE_BYTES.labels(self.cluster, "WATCH", res.plural).inc(len(line) + 1)
                    event = json.loads(line)
                    WATCH_EVENTS.labels(self.cluster, res.plural, event.get("type", "")).inc()
                    yield event
        finally:
            OPEN_WATCHES.labels(self.cluster, res.plural).dec()


async def list_then_watch(
    client: Client,
    res: Resource,
    namespace: str | None = None,
    label_selector: str | None = None,
    metadata_only: bool = False,
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """List, then watch from the list's resourceVersion, for ever: the one list+watch loop of the course.

    Yields ``("LIST", list)`` after every list (the first, and every re-list), then ``(type, object)``
    for each ADDED, MODIFIED and DELETED event. When the server ends the stream (its timeout, or a
    stream cut without a word) it watches again from the last resourceVersion seen, bookmarks
    included. When that version is too old (an ERROR event: 410 Gone) it lists again, and it does the
    same, after a pause that doubles up to 10 s, when a request fails. A re-list may hide changes that
    happened while nothing was watched: a consumer compares the list with what it knew.
    """
    version = ""
    pause = 0.5
    while True:
        try:
            if not version:
                listed = await client.list(res, namespace, label_selector, metadata_only)
                version = str(listed["metadata"].get("resourceVersion", ""))
                pause = 0.5
                yield "LIST", listed
            async for event in client.watch(res, namespace, version, label_selector, metadata_only):
                # Every watch event the API server sends has a type.
                kind, obj = cast(str, event.get("type")), event.get("object", {})
                if kind == "ERROR":
                    version = ""  # 410 Gone: our version is too old, so list afresh
                    log(f"watch of {res.plural} on {client.cluster}: {obj.get('code')} {obj.get('reason')}; "
                        "listing again")
                    break
                version = obj.get("metadata", {}).get("resourceVersion", version)
                if kind != "BOOKMARK":  # a bookmark only moves the resourceVersion on
                    yield kind, obj
        except Exception as exc:  # noqa: BLE001 - a dropped connection: back off, then list again
            log(f"watch of {res.plural} on {client.cluster} failed ({type(exc).__name__}: {exc}); "
                f"listing again in {pause:.1f} s")
            version = ""
            await asyncio.sleep(pause)
            pause = min(pause * 2, 10.0)


async def lookup(api: Any, kind: str) -> Resource:
    """The Resource of a kind as kubectl names it (``configmaps``, ``jobs.batch``, ``Widget``)."""
    singular_version, plural, namespaced = await api.async_lookup_kind(kind)
    singular, _, version = singular_version.partition("/")
    group = singular.partition(".")[2]
    return Resource(group, version, plural, bool(namespaced))


def controller_ref(owner: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """The ownerReference that makes ``owner`` (an object as the API returns it) the controller of a child."""
    meta = owner["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"], "controller": True}


def key_of(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


Handler = Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None]


class Informer:
    """A cache of one resource, kept current by list+watch (or, to compare, by polling).

    Watch mode lists once, then watches from the list's resourceVersion. When the server ends the
    stream it watches again from the last version seen; when that version is too old (410 Gone) it
    lists again and tells the handlers about whatever changed meanwhile. Handlers get
    ``(type, old, new)`` with type ADDED, MODIFIED, DELETED or RESYNC.
    """

    def __init__(
        self,
        client: Client,
        res: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        metadata_only: bool = False,
        poll_interval: float = 0.0,
        resync: float = 0.0,
    ) -> None:
        self.client = client
        self.res = res
        self.namespace = namespace
        self.label_selector = label_selector
        self.metadata_only = metadata_only
        self.poll_interval = poll_interval
        self.resync = resync
        self.store: dict[str, dict[str, Any]] = {}
        self._sizes: dict[str, int] = {}
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()

    def _put(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        key = key_of(obj)
        old = self.store.get(key)
        self.store[key] = obj
        self._sizes[key] = len(json.dumps(obj))
        return old

    def _drop(self, key: str) -> dict[str, Any] | None:
        self._sizes.pop(key, None)
        return self.store.pop(key, None)

    def _gauge(self) -> None:
        CACHE_OBJECTS.labels(self.client.cluster, self.res.plural).set(len(self.store))
        CACHE_BYTES.labels(self.client.cluster, self.res.plural).set(sum(self._sizes.values()))

    def _emit(self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for handler in self.handlers:
            handler(kind, old, new)

    async def _relist(self) -> None:
        self._take_list(await self.client.list(self.res, self.namespace, self.label_selector, self.metadata_only))

    def _take_list(self, listed: dict[str, Any]) -> None:
        """Make the cache what a (re-)list says, telling the handlers what changed since the last one."""
        fresh = {key_of(o): o for o in listed.get("items") or []}
        for key in list(self.store):
            if key not in fresh:
                self._emit("DELETED", self._drop(key), None)
        for key, obj in fresh.items():
            old = self.store.get(key)
            if old is None or old["metadata"].get("resourceVersion") != obj["metadata"].get(
                "resourceVersion"
            ):
                self._put(obj)
                self._emit("ADDED" if old is None else "MODIFIED", old, obj)
        self._gauge()

    async def run(self) -> None:
        if self.resync > 0:
            asyncio.get_running_loop().create_task(self._resync_loop())
        if self.poll_interval > 0:
            await self._poll()
        else:
            await self._list_watch()

    async def _poll(self) -> None:
        while True:
            await self._relist()
            self.synced.set()
            await asyncio.sleep(self.poll_interval)

    async def _list_watch(self) -> None:
        async for kind, obj in list_then_watch(self.client, self.res, self.namespace, self.label_selector,
                                               self.metadata_only):
            if kind == "LIST":
                self._take_list(obj)
                self.synced.set()
                continue
            if kind == "DELETED":
                self._drop(key_of(obj))
                self._emit("DELETED", obj, None)
            else:
                self._emit(kind, self._put(obj), obj)
            self._gauge()

    async def _resync_loop(self) -> None:
        """Every resync period, hand every cached object to the handlers again, as client-go does."""
        await self.synced.wait()
        while True:
            await asyncio.sleep(self.resync)
            for obj in list(self.store.values()):
                self._emit("RESYNC", obj, obj)


class WorkQueue:
    """A de-duplicating queue of keys, as in client-go.

    A key that is already waiting is not added twice, and a key added while it is being processed is
    processed once more afterwards, so no two workers ever reconcile the same key at the same time.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def add(self, key: str) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.put_nowait(key)

    def add_after(self, key: str, delay: float) -> None:
        """RequeueAfter: come back to this key after ``delay`` seconds, unless an event comes first."""
        if key in self._timers:
            self._timers[key].cancel()
        self._timers[key] = asyncio.get_running_loop().call_later(delay, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def forget(self, predicate: Callable[[str], bool]) -> None:
        """Drop waiting keys and timers that match, e.g. every key of a cluster that left."""
        for key in [k for k in self._timers if predicate(k)]:
            self._timers.pop(key).cancel()
        self._dirty = {k for k in self._dirty if not predicate(k)}

    async def get(self) -> str:
        while True:
            key = await self._queue.get()
            if key in self._dirty:  # skip keys that forget() dropped while they waited
                self._dirty.discard(key)
                self._processing.add(key)
                return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.put_nowait(key)

    def __len__(self) -> int:
        return len(self._dirty)


Reconcile = Callable[[str], Awaitable[float | None]]


async def run_loop(name: str, queue: WorkQueue, reconcile: Reconcile) -> None:
    """Take keys off the queue one at a time; a reconcile may ask to be called again after N seconds."""
    failures: dict[str, int] = {}
    while True:
        key = await queue.get()
        try:
            after = await reconcile(key)
            failures.pop(key, None)
        except Exception as exc:  # noqa: BLE001 - a failed reconcile is retried, never fatal
            failures[key] = failures.get(key, 0) + 1
            after = min(0.2 * 2 ** failures[key], 10.0)
            log(f"{name}: reconcile {key} failed ({type(exc).__name__}: {exc}); retrying in {after:.1f} s")
        finally:
            RECONCILES.labels(name).inc()
            queue.done(key)
        if after:
            queue.add_after(key, after)


def log_to_stdout(fmt: str = "%(asctime)s %(name)s %(message)s") -> None:
    """A controller's log as the lab keeps it: INFO and up on stdout, without a line per HTTP request."""
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format=fmt)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per API call drowns the story


def controller_main(main: Coroutine[Any, Any, None]) -> None:
    """Run a controller's ``main()`` until SIGTERM or Ctrl-C, then exit quietly with status 0.

    Either signal cancels ``main``, so its ``finally`` blocks and ``async with`` exits run. kr8s warns
    about any Kubernetes version newer than the ones it was tested with; the course's control plane
    may be, and the warning would only clutter the controller's log.
    """
    warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")

    async def until_stopped() -> None:
        task = asyncio.current_task()
        assert task is not None
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, task.cancel)
        try:
            await main
        except asyncio.CancelledError:
            pass

    asyncio.run(until_stopped())
