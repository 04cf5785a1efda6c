"""A pretend bare-metal management service: slow, imperative, and outside Kubernetes.

It stands in for the BMCs and provisioning services a real bare-metal operator drives. Inspecting a
host takes minutes of *simulated* time (`--seconds-per-minute` sets how many real seconds one simulated
minute lasts). When an inspection ends, the service calls back the URL the caller gave it. It has no
Kubernetes credentials and never talks to the API server.

The API (JSON over HTTP on 127.0.0.1)::

    GET  /healthz
    POST /hosts                {"id"}                 -> 201 (new) | 200 (already registered)
    GET  /hosts/ID                                    -> host | 404 (with its inspection's start and end)
    POST /hosts/ID/inspect     {"callback"?: url}     -> 202; state "inspecting", later "inspected"
    GET  /stats                                       -> request and callback counts

Run: python metal_service.py --port 0 --seconds-per-minute 0.2 --inspect-minutes 15
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

#: Its log, one whole line per record: requests are served on threads of their own, and print() from
#: two threads at once can run their lines together.
log = logging.getLogger("metal-service")


class Metal:
    """The service's state: hosts, and the timers that finish their inspections."""

    def __init__(self, seconds_per_minute: float, inspect_minutes: float) -> None:
        self.seconds_per_minute = seconds_per_minute
        self.inspect_minutes = inspect_minutes
        self.hosts: dict[str, dict[str, Any]] = {}
        self.stats = {"requests": 0, "callbacks sent": 0, "callbacks failed": 0}
        self.lock = threading.Lock()

    def register(self, host_id: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            if host_id in self.hosts:
                return 200, dict(self.hosts[host_id])
            self.hosts[host_id] = {"id": host_id, "state": "registered", "registeredAt": time.time()}
            return 201, dict(self.hosts[host_id])

    def inspect(self, host_id: str, callback: str | None) -> tuple[int, dict[str, Any]]:
        with self.lock:
            host = self.hosts.get(host_id)
            if host is None:
                return 404, {"error": f"no host {host_id}"}
            if host["state"] == "registered":
                host["state"] = "inspecting"
                host["etaMinutes"] = self.inspect_minutes
                host["inspectionStarted"] = time.time()
                delay = self.inspect_minutes * self.seconds_per_minute
                timer = threading.Timer(delay, self._finish_inspection, (host_id, callback))
                timer.daemon = True
                timer.start()
            return 202, dict(host)

    def _finish_inspection(self, host_id: str, callback: str | None) -> None:
        digest = hashlib.sha256(host_id.encode()).digest()
        with self.lock:
            host = self.hosts[host_id]
            host["state"] = "inspected"
            host["inspectionFinished"] = time.time()
            host["hardware"] = {
                "cpus": 16 << (digest[0] % 3),
                "memoryGiB": 64 << (digest[1] % 3),
                "serial": digest[2:7].hex().upper(),
            }
        log.info(f"inspected {host_id}")
        if callback:
            try:
                httpx.post(callback, json={"id": host_id, "event": "inspected"}, timeout=5).raise_for_status()
                with self.lock:
                    self.stats["callbacks sent"] += 1
            except httpx.HTTPError as err:
                with self.lock:
                    self.stats["callbacks failed"] += 1  # the controller's periodic check will notice anyway
                log.warning(f"callback to {callback} failed: {err}")


class Handler(BaseHTTPRequestHandler):
    server: Server

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length)) if length else {}

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        metal = self.server.metal
        parts = self.path.strip("/").split("/")
        if parts == ["healthz"]:
            return self._reply(200, {"ok": True})
        if parts == ["stats"]:
            return self._reply(
                200,
                {
                    **metal.stats,
                    "hosts": len(metal.hosts),
                    "secondsPerMinute": metal.seconds_per_minute,
                    "inspectMinutes": metal.inspect_minutes,
                },
            )
        metal.stats["requests"] += 1
        if len(parts) == 2 and parts[0] == "hosts":
            host = metal.hosts.get(parts[1])
            return self._reply(200, host) if host else self._reply(404, {"error": f"no host {parts[1]}"})
        return self._reply(404, {"error": "unknown path"})

    def do_POST(self) -> None:  # noqa: N802
        metal = self.server.metal
        metal.stats["requests"] += 1
        parts = self.path.strip("/").split("/")
        body = self._body()
        if parts == ["hosts"] and body.get("id"):
            status, host = metal.register(str(body["id"]))
        elif len(parts) == 3 and parts[0] == "hosts" and parts[2] == "inspect":
            status, host = metal.inspect(parts[1], body.get("callback"))
        else:
            return self._reply(404, {"error": "unknown path"})
        log.info(f"{self.command} {self.path} -> {status}")
        return self._reply(status, host)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, metal: Metal) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.metal = metal


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--seconds-per-minute", type=float, default=0.2, help="real seconds per simulated minute"
    )
    parser.add_argument("--inspect-minutes", type=float, default=15, help="simulated minutes per inspection")
    args = parser.parse_args(argv)
    if args.seconds_per_minute <= 0 or args.inspect_minutes < 0:
        parser.error("--seconds-per-minute must be positive and --inspect-minutes not negative")
    server = Server(args.port, Metal(args.seconds_per_minute, args.inspect_minutes))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
    log.info(f"metal service listening on http://127.0.0.1:{server.server_address[1]}")
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
