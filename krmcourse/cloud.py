"""A pretend cloud: a small imperative HTTP service that the labs run beside a cluster.

Provisioner controllers exist because real infrastructure lives outside KRM and speaks its own
imperative API. This module gives the labs such a system with the properties that matter: Kubernetes
knows nothing about it, creating a bucket takes time (it answers ``202`` and reports ``CREATING``
until it is ``READY``), requests can be slow, and the whole service can have an outage or fail the
next few calls. An admin endpoint switches those faults on and off while a controller is running.

The API (JSON over HTTP, 127.0.0.1 only, a free port by default)::

    GET    /healthz                  200 while the process runs, even during an outage
    GET    /v1/buckets               {"items": [bucket, ...]}
    POST   /v1/buckets               {"name", "location"?, "storageClass"?, "versioning"?} -> 202 | 409
    GET    /v1/buckets/NAME          bucket | 404
    PATCH  /v1/buckets/NAME          {"storageClass"?, "versioning"?} -> bucket (location is fixed: 400)
    DELETE /v1/buckets/NAME          204 | 404
    GET    /admin/faults             the fault settings
    PUT    /admin/faults             {"latency", "provision_seconds", "outage", "fail_next"} (any subset)
    GET    /admin/calls              every bucket request so far: method, path, bucket, status, seconds
    POST   /admin/reset              forget buckets, faults and calls

Use it in-process (:class:`Cloud`, a background thread), or as a process that a lab manages::

    python -m krmcourse.cloud --provision-seconds 2     # prints "cloud listening on http://..."

and talk to it with :class:`CloudClient`, which turns HTTP failures into :class:`CloudError` types.

>>> with Cloud(provision_seconds=0) as cloud:
...     client = CloudClient(cloud.url)
...     client.create_bucket("demo")["state"]
'CREATING'
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import httpx

LOCATIONS = ("local-1", "local-2", "far-away-1")
STORAGE_CLASSES = ("STANDARD", "NEARLINE", "COLDLINE")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


@dataclass
class Faults:
    """What the cloud does wrong right now. Changed live through ``PUT /admin/faults``."""

    latency: float = 0.0  # seconds every bucket request waits before it is answered
    provision_seconds: float = 1.0  # how long a new bucket stays CREATING
    outage: bool = False  # answer every bucket request with 503
    fail_next: int = 0  # answer the next N bucket requests with 500


@dataclass
class _State:
    faults: Faults = field(default_factory=Faults)
    buckets: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Stay quiet: the call log at /admin/calls is the record."""

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        started = time.monotonic()
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            body = self._read_json()
        except ValueError as exc:
            self._send(HTTPStatus.BAD_REQUEST, {"error": f"body is not JSON: {exc}"})
            return
        if path == "/healthz" or path.startswith("/admin"):
            status, payload = self.server.admin(method, path, body)
            self._send(status, payload)
            return
        status, payload = self.server.bucket_call(method, path, body)
        bucket = str(body.get("name", "")) if method == "POST" else path.rpartition("/v1/buckets/")[2]
        with self.server.state.lock:
            self.server.state.calls.append(
                {"method": method, "path": path, "bucket": bucket, "status": int(status),
                 "seconds": round(time.monotonic() - started, 3), "at": time.time()}
            )
        self._send(status, payload)

    def _read_json(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return {}
        data = json.loads(self.rfile.read(length))
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        return data

    def _send(self, status: HTTPStatus, payload: Any) -> None:
        data = b"" if status == HTTPStatus.NO_CONTENT else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, port: int, state: _State) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.state = state

    @property
    def url(self) -> str:
        """``http://host:port``: an AF_INET server's address is a (str host, int port) pair."""
        host, port = cast("tuple[str, int]", self.server_address[:2])
        return f"http://{host}:{port}"

    def admin(self, method: str, path: str, body: dict[str, Any]) -> tuple[HTTPStatus, Any]:
        st = self.state
        with st.lock:
            if path == "/healthz":
                return HTTPStatus.OK, {"ok": True}
            if path == "/admin/faults" and method == "GET":
                return HTTPStatus.OK, asdict(st.faults)
            if path == "/admin/faults" and method == "PUT":
                unknown = set(body) - set(asdict(st.faults))
                if unknown:
                    return HTTPStatus.BAD_REQUEST, {"error": f"unknown fault settings: {sorted(unknown)}"}
                for key, value in body.items():
                    setattr(st.faults, key, type(getattr(st.faults, key))(value))
                return HTTPStatus.OK, asdict(st.faults)
            if path == "/admin/calls" and method == "GET":
                return HTTPStatus.OK, {"items": list(st.calls)}
            if path == "/admin/reset" and method == "POST":
                st.faults, st.buckets, st.calls = Faults(), {}, []
                return HTTPStatus.OK, {"ok": True}
        return HTTPStatus.NOT_FOUND, {"error": f"no admin route {method} {path}"}

    def bucket_call(self, method: str, path: str, body: dict[str, Any]) -> tuple[HTTPStatus, Any]:
        st = self.state
        with st.lock:
            faults = Faults(**asdict(st.faults))
            if faults.outage:
                return HTTPStatus.SERVICE_UNAVAILABLE, {"error": "the cloud is having an outage"}
            if faults.fail_next > 0:
                st.faults.fail_next -= 1
                return HTTPStatus.INTERNAL_SERVER_ERROR, {"error": "injected failure"}
        if faults.latency:
            time.sleep(faults.latency)  # only this request's thread waits
        parts = path.strip("/").split("/")
        if parts[:2] != ["v1", "buckets"] or len(parts) > 3:
            return HTTPStatus.NOT_FOUND, {"error": f"no route {method} {path}"}
        with st.lock:
            self._advance(faults.provision_seconds)
            if len(parts) == 2 and method == "GET":
                return HTTPStatus.OK, {"items": [dict(b) for b in st.buckets.values()]}
            if len(parts) == 2 and method == "POST":
                return self._create(body)
            name = parts[2] if len(parts) == 3 else ""
            bucket = st.buckets.get(name)
            if bucket is None:
                return HTTPStatus.NOT_FOUND, {"error": f"bucket {name!r} does not exist"}
            if method == "GET":
                return HTTPStatus.OK, dict(bucket)
            if method == "DELETE":
                del st.buckets[name]
                return HTTPStatus.NO_CONTENT, None
            if method == "PATCH":
                return self._update(bucket, body)
        return HTTPStatus.METHOD_NOT_ALLOWED, {"error": f"{method} is not allowed on {path}"}

    def _advance(self, provision_seconds: float) -> None:
        now = time.time()
        for bucket in self.state.buckets.values():
            if bucket["state"] == "CREATING" and now - bucket["createdAt"] >= provision_seconds:
                bucket["state"] = "READY"

    def _create(self, body: dict[str, Any]) -> tuple[HTTPStatus, Any]:
        name = str(body.get("name", ""))
        if not _NAME.match(name):
            return HTTPStatus.BAD_REQUEST, {"error": f"bad bucket name {name!r}: use 3-63 of a-z, 0-9, -"}
        if name in self.state.buckets:
            return HTTPStatus.CONFLICT, {"error": f"bucket {name!r} already exists"}
        bucket: dict[str, Any] = {"name": name, "location": body.get("location", LOCATIONS[0]),
                                   "storageClass": body.get("storageClass", STORAGE_CLASSES[0]),
                                   "versioning": bool(body.get("versioning", False)),
                                   "state": "CREATING", "createdAt": time.time()}
        if problem := _invalid(bucket):
            return HTTPStatus.BAD_REQUEST, {"error": problem}
        bucket["url"] = f"{self.url}/v1/buckets/{name}"
        self.state.buckets[name] = bucket
        return HTTPStatus.ACCEPTED, dict(bucket)

    def _update(self, bucket: dict[str, Any], body: dict[str, Any]) -> tuple[HTTPStatus, Any]:
        if "location" in body and body["location"] != bucket["location"]:
            return HTTPStatus.BAD_REQUEST, {"error": "a bucket's location cannot change"}
        changed: dict[str, Any] = {**bucket, **{k: body[k] for k in ("storageClass", "versioning") if k in body}}
        if problem := _invalid(changed):
            return HTTPStatus.BAD_REQUEST, {"error": problem}
        bucket.update(changed)
        return HTTPStatus.OK, dict(bucket)


def _invalid(bucket: dict[str, Any]) -> str:
    if bucket["location"] not in LOCATIONS:
        return f"unknown location {bucket['location']!r}; choose one of {', '.join(LOCATIONS)}"
    if bucket["storageClass"] not in STORAGE_CLASSES:
        return f"unknown storageClass {bucket['storageClass']!r}; choose one of {', '.join(STORAGE_CLASSES)}"
    return ""


class Cloud:
    """The cloud service in a background thread of this process.

    >>> cloud = Cloud(latency=0.5).start()
    >>> cloud.url.startswith("http://127.0.0.1:")
    True
    >>> cloud.stop()
    """

    def __init__(self, *, port: int = 0, latency: float = 0.0, provision_seconds: float = 1.0) -> None:
        self._state = _State(faults=Faults(latency=latency, provision_seconds=provision_seconds))
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the cloud is not running; call start() first")
        return self._server.url

    def start(self) -> Cloud:
        if self._server is None:
            try:
                self._server = _Server(self._port, self._state)
            except OSError as exc:
                hint = "use port=0 for a free one"
                raise OSError(f"cannot listen on 127.0.0.1:{self._port} ({exc}); {hint}") from exc
            self._thread = threading.Thread(target=self._server.serve_forever, name="krmcourse-cloud",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port. Safe to call twice."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Cloud:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class CloudError(Exception):
    """The cloud refused or failed a request. ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class CloudUnavailable(CloudError):
    """No answer in time, a refused connection, a 503 outage, or a 5xx: worth retrying later."""


class BucketExists(CloudError):
    """Create found a bucket of that name already (409): adopt it, do not fail."""


class CloudClient:
    """A small synchronous client for the cloud's API, with a short timeout by default.

    A provisioner uses a short timeout so that a slow cloud cannot hold up its reconcile loop.
    """

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        try:
            resp = httpx.request(method, self.url + path, json=body, timeout=self.timeout)
        except httpx.TimeoutException as exc:
            raise CloudUnavailable(f"{method} {path}: no answer within {self.timeout:g}s") from exc
        except httpx.TransportError as exc:
            raise CloudUnavailable(f"{method} {path}: cannot reach the cloud at {self.url} ({exc})") from exc
        if resp.status_code >= 500:
            raise CloudUnavailable(f"{method} {path}: {resp.status_code} {_error(resp)}", resp.status_code)
        if resp.status_code == 409:
            raise BucketExists(f"{method} {path}: {_error(resp)}", 409)
        if resp.status_code >= 400 and resp.status_code != 404:
            raise CloudError(f"{method} {path}: {resp.status_code} {_error(resp)}", resp.status_code)
        return resp

    def create_bucket(self, name: str, *, location: str = LOCATIONS[0], storage_class: str = "STANDARD",
                      versioning: bool = False) -> dict[str, Any]:
        body = {"name": name, "location": location, "storageClass": storage_class, "versioning": versioning}
        return cast("dict[str, Any]", self._call("POST", "/v1/buckets", body).json())

    def get_bucket(self, name: str) -> dict[str, Any] | None:
        resp = self._call("GET", f"/v1/buckets/{name}")
        return None if resp.status_code == 404 else cast("dict[str, Any]", resp.json())

    def update_bucket(self, name: str, **fields: Any) -> dict[str, Any]:
        resp = self._call("PATCH", f"/v1/buckets/{name}", fields)
        if resp.status_code == 404:
            raise CloudError(f"bucket {name!r} does not exist", 404)
        return cast("dict[str, Any]", resp.json())

    def delete_bucket(self, name: str) -> bool:
        """Delete a bucket. False when there was none, which a finalizer treats as done."""
        return self._call("DELETE", f"/v1/buckets/{name}").status_code == 204

    def list_buckets(self) -> list[dict[str, Any]]:
        return cast("list[dict[str, Any]]", self._call("GET", "/v1/buckets").json()["items"])

    def faults(self) -> dict[str, Any]:
        return cast("dict[str, Any]", self._call("GET", "/admin/faults").json())

    def set_faults(self, **changes: Any) -> dict[str, Any]:
        """Change some fault settings, e.g. ``set_faults(outage=True)``; returns all of them."""
        return cast("dict[str, Any]", self._call("PUT", "/admin/faults", changes).json())

    def calls(self) -> list[dict[str, Any]]:
        return cast("list[dict[str, Any]]", self._call("GET", "/admin/calls").json()["items"])

    def reset(self) -> None:
        self._call("POST", "/admin/reset")

    def healthy(self) -> bool:
        try:
            return httpx.get(self.url + "/healthz", timeout=self.timeout).status_code == 200
        except httpx.HTTPError:
            return False


def _error(resp: httpx.Response) -> str:
    try:
        return str(resp.json().get("error", resp.text))
    except ValueError:
        return resp.text


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM or Ctrl-C. The first line of output says where."""
    parser = argparse.ArgumentParser(prog="python -m krmcourse.cloud", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each bucket request waits")
    parser.add_argument("--provision-seconds", type=float, default=1.0, help="seconds a bucket is CREATING")
    args = parser.parse_args(argv)
    cloud = Cloud(port=args.port, latency=args.latency, provision_seconds=args.provision_seconds).start()
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    print(f"cloud listening on {cloud.url}", flush=True)
    stopped.wait()
    cloud.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
