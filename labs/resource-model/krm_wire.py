"""Speak to a lab's API server over plain HTTPS, without any Kubernetes client library.

kubectl, kr8s and kopf all end up sending ordinary HTTP requests whose bodies are the same JSON or
YAML documents you keep in files. The resource-model notebook sends some of those requests by hand
so that learners see the wire itself: the status code, the ``Status`` object of an error, and the
lines of a watch. Only ``httpx`` and the kubeconfig are used, the way any new client would start
(:mod:`krmcourse.credentials` reads the kubeconfig: server, CA, and a client certificate or token).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from krmcourse.credentials import connection


@dataclass(frozen=True)
class Reply:
    """One HTTP response: the status code and the decoded JSON body (a ``Status`` on errors)."""

    status: int
    body: dict[str, Any]

    @property
    def reason(self) -> str:
        """The machine-readable reason of a ``Status`` (``Conflict``, ``Forbidden``, ``Invalid``...)."""
        return str(self.body.get("reason", ""))

    @property
    def message(self) -> str:
        return str(self.body.get("message", ""))


class RawClient:
    """A few HTTP verbs against one API server, returning :class:`Reply` objects, never raising on 4xx.

    >>> with RawClient(lab.kubeconfig) as raw:              # doctest: +SKIP
    ...     raw.get("/api/v1/namespaces/model/configmaps/greeting").status
    200
    """

    def __init__(self, kubeconfig: Path, user_agent: str = "krmcourse-raw/0.1") -> None:
        self.kubeconfig = Path(kubeconfig)
        conn = connection(self.kubeconfig)
        self.server, self._tls = conn.server, conn.tls
        self._headers = {**conn.headers, "User-Agent": user_agent, "Accept": "application/json"}
        self._http = self._new_http(timeout=30)

    def _new_http(self, timeout: float | None) -> httpx.Client:
        return httpx.Client(
            base_url=self.server,
            verify=self._tls,
            headers=self._headers,
            timeout=httpx.Timeout(30, read=timeout),
        )

    def request(
        self,
        method: str,
        path: str,
        body: bytes | str | dict[str, Any] | None = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Reply:
        """Send one request; ``body`` may be a dict (sent as JSON) or bytes/text sent as they are."""
        if isinstance(body, dict):
            body = json.dumps(body)
        headers = {"Content-Type": content_type} if body is not None else {}
        response = self._http.request(method, path, content=body, headers=headers, params=params)
        try:
            decoded = response.json()
        except ValueError:
            decoded = {"text": response.text}
        return Reply(response.status_code, decoded if isinstance(decoded, dict) else {"items": decoded})

    def get(self, path: str, params: dict[str, str] | None = None) -> Reply:
        return self.request("GET", path, params=params)

    def put(self, path: str, body: dict[str, Any]) -> Reply:
        return self.request("PUT", path, body)

    def delete(self, path: str) -> Reply:
        return self.request("DELETE", path)

    def collection_path(self, api_version: str, kind: str, namespace: str | None) -> str:
        """The URL of a kind's collection, found through discovery like kubectl does for a new CRD."""
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        listing = self.get(base)
        if listing.status != 200:
            raise LookupError(f"The server does not serve {api_version}: {listing.status} {listing.message}")
        for resource in listing.body.get("resources", []):
            if resource["kind"] == kind and "/" not in resource["name"]:
                if resource["namespaced"] and not namespace:
                    raise ValueError(f"{kind} is namespaced: the document needs metadata.namespace.")
                scope = f"/namespaces/{namespace}" if resource["namespaced"] else ""
                return f"{base}{scope}/{resource['name']}"
        raise LookupError(f"{api_version} has no kind {kind}.")

    def post_yaml(self, document: str) -> Reply:
        """POST a YAML document unchanged, as ``application/yaml``: the file is the request body."""
        head = yaml.safe_load(document) or {}
        if not isinstance(head, dict) or "apiVersion" not in head or "kind" not in head:
            raise ValueError("The document needs apiVersion and kind at the top level.")
        namespace = (head.get("metadata") or {}).get("namespace")
        path = self.collection_path(head["apiVersion"], head["kind"], namespace)
        return self.request("POST", path, document, content_type="application/yaml")

    def watch(self, path: str, resource_version: str | None = None, seconds: int = 120) -> Watch:
        """Start a watch on a collection in a background thread; see :class:`Watch`."""
        params = {"watch": "true", "timeoutSeconds": str(seconds)}
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        return Watch(lambda: self._new_http(timeout=None), path, params).start()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Watch:
    """One watch request streaming in a thread; each line the server sends becomes an event.

    The server ends the stream after ``timeoutSeconds``; :meth:`stop` ends it sooner. Either way
    the thread and its connection are gone afterwards, so a notebook leaks nothing.
    """

    http_factory: Callable[[], httpx.Client]
    path: str
    params: dict[str, str]
    events: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    _thread: threading.Thread | None = None
    _http: httpx.Client | None = None
    _socket: socket.socket | None = None
    _stopping: bool = False

    def start(self) -> Watch:
        self._http = self.http_factory()
        self._thread = threading.Thread(target=self._run, name=f"watch {self.path}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        assert self._http is not None
        try:
            with self._http.stream("GET", self.path, params=self.params) as response:
                stream = response.extensions.get("network_stream")
                self._socket = stream.get_extra_info("socket") if stream is not None else None
                if response.status_code != 200:
                    self.error = f"{response.status_code}: {response.read().decode()[:300]}"
                    return
                for line in response.iter_lines():
                    if line.strip():
                        self.events.append(json.loads(line))
        except (httpx.HTTPError, OSError, RuntimeError, ValueError) as exc:
            if not self._stopping:
                self.error = f"{type(exc).__name__}: {exc}"

    def wait_for(self, count: int, timeout: float = 15) -> list[dict[str, Any]]:
        """Block until at least ``count`` events arrived; TimeoutError with what did arrive otherwise."""
        deadline = time.monotonic() + timeout
        while len(self.events) < count:
            if self.error:
                raise RuntimeError(f"The watch failed: {self.error}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Only {len(self.events)} of {count} watch events arrived in {timeout:.0f} s."
                )
            time.sleep(0.05)
        return self.events

    def rows(self, *fields: str) -> list[dict[str, Any]]:
        """One dict per event: its type, the object's name and resourceVersion, plus dotted ``fields``."""
        out = []
        for event in self.events:
            obj = event.get("object", {})
            row = {
                "type": event.get("type"),
                "name": obj.get("metadata", {}).get("name"),
                "resourceVersion": obj.get("metadata", {}).get("resourceVersion"),
            }
            for dotted in fields:
                value: Any = obj
                for part in dotted.split("."):
                    value = value.get(part) if isinstance(value, dict) else None
                row[dotted] = value
            out.append(row)
        return out

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Shut the socket down, which wakes the thread's blocked read, then wait for the thread.

        An API server answers a watch at once, so the socket is known by then. Should a server never
        answer, the daemon thread lingers until the server's ``timeoutSeconds`` closes the stream.
        """
        self._stopping = True
        deadline = time.monotonic() + 5
        while self._socket is None and self.running and time.monotonic() < deadline:
            time.sleep(0.02)  # stopped right after start: wait until the request is on the wire
        if self._socket is not None:
            try:
                self._socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the server
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._http is not None:
            self._http.close()
