"""Faults a client must survive, injected between it and a lab's API server.

:class:`ApiFaults` is a proxy on loopback in front of one API server. A client pointed at its
kubeconfig (a controller, an informer in a test) talks to the real API server through it, with the
credentials of the kubeconfig the proxy was given, and meets the faults that are asked for:

* :meth:`ApiFaults.cut_watches` breaks every open watch off, as a dropped connection does; with
  ``cleanly=True`` it ends them the way the server's own timeout does, without a word;
* :meth:`ApiFaults.expire_watches` sends every open watch the ``410 Gone`` that a compacted history
  gives, and answers ``410`` to every later watch that resumes from a version the client held before
  (one that starts from a fresh list's version is served, as after a real compaction);
* :attr:`ApiFaults.event_delay` holds each watch event back, so that the client acts on a stale cache.

The proxy runs on its own event loop in a thread (:class:`krmcourse.background.LoopThread`), so it
serves a notebook, whose loop is busy, as well as a test. Everything else passes through unchanged.

>>> with ApiFaults(lab.kubeconfig, lab.home) as proxy:         # doctest: +SKIP
...     informer = start_informer(proxy.kubeconfig)
...     proxy.expire_watches()
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from .background import LoopThread
from .credentials import connection
from .paths import private_file

#: Request headers passed on; the proxy itself authenticates to the API server.
_PASSED = {"accept", "content-type", "user-agent"}


@dataclass
class _Watch:
    """One open watch: the task that copies its events, and how it is to end."""

    pump: asyncio.Task[None]
    ending: str = ""  # "", "cut", "clean" or "expired"


class ApiFaults:
    """A fault-injecting proxy, on loopback, in front of the API server that ``kubeconfig`` names."""

    def __init__(self, kubeconfig: Path, folder: Path, name: str = "faults") -> None:
        self.upstream = connection(Path(kubeconfig))
        self.kubeconfig = Path(folder) / f"{name}.kubeconfig"
        #: Seconds each watch event is held back before the client gets it.
        self.event_delay = 0.0
        #: What the proxy did: requests passed, watches opened, cut, ended cleanly and expired.
        self.counts = {"requests": 0, "watches": 0, "cut": 0, "clean": 0, "expired": 0}
        self._watches: list[_Watch] = []
        self._expired_at = 0  # watches that start at or before this resourceVersion get 410
        self._newest = 0  # the newest resourceVersion that passed through
        self._listed_since: set[str] = set()  # versions of lists answered since the expiry
        self._kill_on_write: int | None = None  # a pid to SIGKILL once its next write has been done
        self.killed = False  # whether that kill was sent
        self._last_request = time.monotonic()
        self._thread = LoopThread("api-faults")
        self._session: aiohttp.ClientSession | None = None

    # --- life cycle -------------------------------------------------------------------------------
    def start(self, timeout: float = 10) -> ApiFaults:
        self._thread.start(self._serve, timeout)
        return self

    def stop(self) -> None:
        self._thread.stop()
        self.kubeconfig.unlink(missing_ok=True)

    def __enter__(self) -> ApiFaults:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    async def _serve(self, ready: Callable[[], None]) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.upstream.tls), timeout=timeout,
                                         headers=self.upstream.headers) as session:
            self._session = session
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_route("*", "/{path:.*}", self._forward)
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            self._write_kubeconfig(port)
            ready()
            try:
                await asyncio.Event().wait()  # until stop() cancels it
            finally:
                for watch in self._watches:
                    watch.pump.cancel()
                await runner.cleanup()

    def _write_kubeconfig(self, port: int) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "faults",
            "clusters": [{"name": "faults", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            # A token only so that clients which insist on credentials (krmcourse.credentials) accept the
            # file: the proxy drops it, and authenticates upstream with the kubeconfig it was given.
            "users": [{"name": "faults", "user": {"token": "dropped-by-the-fault-proxy"}}],
            "contexts": [{"name": "faults", "context": {"cluster": "faults", "user": "faults"}}],
        }
        private_file(self.kubeconfig, yaml.safe_dump(config))

    # --- the faults, asked for from any thread -----------------------------------------------------
    def cut_watches(self, cleanly: bool = False) -> int:
        """End every open watch: broken off (as a dropped connection), or ``cleanly`` (as a server timeout).
        Returns how many were open."""
        return self._call(self._end_watches("clean" if cleanly else "cut"))

    def expire_watches(self) -> int:
        """Send every open watch 410 Gone, and refuse later watches from any resourceVersion this proxy has
        passed on so far, as a compacted history would. Returns how many were open."""
        return self._call(self._expire())

    def open_watches(self) -> int:
        return len(self._watches)

    def idle_for(self) -> float:
        """Seconds since the client last sent a request (open watches do not count)."""
        return time.monotonic() - self._last_request

    def kill_on_write(self, pid: int) -> None:
        """SIGKILL ``pid`` as soon as the API server has done the next write that passes through, before
        the writer hears the answer: a crash between two writes of one reconcile."""
        self._kill_on_write, self.killed = pid, False

    def _call(self, coro: Coroutine[Any, Any, int]) -> int:
        return self._thread.call(coro)

    async def _end_watches(self, how: str) -> int:
        ended = list(self._watches)
        for watch in ended:
            watch.ending = how
            watch.pump.cancel()
        return len(ended)

    async def _expire(self) -> int:
        self._expired_at, self._listed_since = self._newest, set()
        return await self._end_watches("expired")

    def _saw(self, body: bytes) -> None:
        """Keep the newest resourceVersion a list, an object or a watch event carried."""
        try:
            doc = json.loads(body)
        except ValueError:
            return
        meta = (doc.get("object", doc) if isinstance(doc, dict) else {}).get("metadata") or {}
        version = str(meta.get("resourceVersion", ""))
        if version.isdigit():
            self._newest = max(self._newest, int(version))
            if "items" in doc:  # a list: a watch may start from its version, as after a real compaction
                self._listed_since.add(version)

    # --- the proxy ---------------------------------------------------------------------------------
    async def _forward(self, request: web.Request) -> web.StreamResponse:
        self.counts["requests"] += 1
        self._last_request = time.monotonic()
        watching = request.query.get("watch") in ("true", "1")
        if watching and self._too_old(request.query.get("resourceVersion", "")):
            return await self._gone(request, web.StreamResponse(headers={"Content-Type": "application/json"}))
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() in _PASSED}
        body = await request.read()
        try:
            upstream = await self._session.request(request.method, f"{self.upstream.server}{request.path_qs}",
                                                   headers=headers, data=body or None)
        except aiohttp.ClientError:  # the API server is down (restarting): the client finds it so too
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=502)
        if self._kill_on_write is not None and request.method not in ("GET", "HEAD") and upstream.status < 300:
            pid, self._kill_on_write = self._kill_on_write, None
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self.killed = True
        try:
            kind = {"Content-Type": upstream.headers.get("Content-Type", "application/json")}
            if watching and upstream.status == 200:
                return await self._watch(request, upstream, web.StreamResponse(headers=kind))
            body = await upstream.read()
            self._saw(body)
            return web.Response(status=upstream.status, body=body, headers=kind)
        finally:
            upstream.release()

    def _too_old(self, version: str) -> bool:
        """A watch from a version the client had before the expiry; one from a fresh list may go on."""
        return (version.isdigit() and version != "0" and int(version) <= self._expired_at
                and version not in self._listed_since)

    async def _gone(self, request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
        self.counts["expired"] += 1
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Expired",
                  "code": 410, "message": f"too old resource version (the fault proxy expired it at "
                                          f"{self._expired_at})"}
        with contextlib.suppress(ConnectionResetError):  # the client left already
            if not response.prepared:
                await response.prepare(request)
            await response.write(json.dumps({"type": "ERROR", "object": status}).encode() + b"\n")
            await response.write_eof()
        return response

    async def _watch(self, request: web.Request, upstream: aiohttp.ClientResponse,
                     response: web.StreamResponse) -> web.StreamResponse:
        await response.prepare(request)
        self.counts["watches"] += 1
        watch = _Watch(asyncio.create_task(self._pump(upstream, response)))
        self._watches.append(watch)
        try:
            await watch.pump
        except asyncio.CancelledError:
            if not watch.ending:  # the proxy stops, or the client went away
                raise
        except ConnectionResetError:  # the client went away
            return response
        except aiohttp.ClientError:  # the API server broke the stream off (it restarted): so do we
            watch.ending = "cut"
        finally:
            self._watches.remove(watch)
        if watch.ending == "expired":
            return await self._gone(request, response)
        self.counts[watch.ending or "clean"] += 1
        if watch.ending == "cut" and request.transport is not None:
            request.transport.abort()  # no end of stream: the client sees a broken connection
            return response
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    async def _pump(self, upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
        async for line in upstream.content:
            self._saw(line)
            if self.event_delay > 0:
                await asyncio.sleep(self.event_delay)
            await response.write(line)
