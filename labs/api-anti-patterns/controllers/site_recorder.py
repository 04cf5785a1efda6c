"""The site recorder: edge devices send it their sensor readings, and it reports them in a Site's status.

Devices POST a JSON list of readings to its ingest endpoint. For each batch the recorder calls a record
function (``--record FILE``: a file with one function, ``record(status, readings, archive)`` by default
``record_history.py`` next to this script) and replaces the Site's status with what it returns, in one
update of the status subresource. The archive is a database outside the Kubernetes API (SQLite, in the
recorder's memory here; a database server in real life): what the function saves there and the status
write succeed or fail together, so a refused write loses nothing twice and saves nothing twice.

It answers each batch with the outcome of its status write, and counts everything in its own metrics:
readings received, status writes by result, readings in the archive, the size of the Site it last wrote.

Run: python site_recorder.py --namespace inventory --site harbour [--record FILE]
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import signal
import sqlite3
import sys
import traceback
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import Counter, Gauge

from krmcourse.controllerkit import serve_metrics
from krmcourse.credentials import connection
from krmcourse.labcode import script_module

RECEIVED = Counter("site_readings_received", "Readings the devices sent to the recorder")
WRITES = Counter("site_status_writes", "Updates of the Site's status, by result", ["result", "code"])
FAILED = Counter("site_record_failures", "Batches the record function raised an exception on")
ARCHIVED = Gauge("site_archived_readings", "Readings held in the archive (counted in the database)")
SITE_BYTES = Gauge("site_object_bytes", "JSON size of the Site as the API server returned it last")

Record = Callable[[dict[str, Any], list[dict[str, Any]], "Archive"], dict[str, Any]]


class Archive:
    """A store outside the Kubernetes API for the bulk of the readings: one row per reading.

    >>> archive.save(readings)   # doctest: +SKIP
    >>> archive.count()          # doctest: +SKIP
    """

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", isolation_level=None)
        self._db.execute("CREATE TABLE readings (device TEXT, seq INTEGER, at TEXT, body TEXT)")

    def save(self, readings: list[dict[str, Any]]) -> None:
        """Store these readings (in the transaction of the current batch)."""
        self._db.executemany(
            "INSERT INTO readings VALUES (?, ?, ?, ?)",
            [(r.get("device"), r.get("seq"), r.get("at"), json.dumps(r)) for r in readings],
        )

    def count(self, device: str | None = None) -> int:
        """How many readings the archive holds (of one device, when given)."""
        if device is None:
            return int(self._db.execute("SELECT count(*) FROM readings").fetchone()[0])
        return int(self._db.execute("SELECT count(*) FROM readings WHERE device = ?", (device,)).fetchone()[0])

    def begin(self) -> None:
        self._db.execute("BEGIN")

    def end(self, keep: bool) -> None:
        self._db.execute("COMMIT" if keep else "ROLLBACK")
        ARCHIVED.set(self.count())


def load_record(path: Path) -> Record:
    """The one function the file defines (or the one called ``record``)."""
    module = script_module(path)
    functions = {name: fn for name, fn in vars(module).items()
                 if inspect.isfunction(fn) and fn.__module__ == module.__name__ and not name.startswith("_")}
    if "record" in functions:
        return functions["record"]
    if len(functions) != 1:
        raise SystemExit(f"{path} must define one function, record(status, readings, archive); "
                         f"it defines {sorted(functions) or 'none'}")
    return next(iter(functions.values()))


class Recorder:
    """Turns batches of readings into status updates of one Site."""

    def __init__(self, namespace: str, site: str, record: Record) -> None:
        conn = connection(Path(os.environ["KUBECONFIG"]))
        self.http = httpx.Client(base_url=conn.server, verify=conn.tls, headers=conn.headers, timeout=60)
        self.url = f"/apis/inventory.krmcourse.dev/v1alpha1/namespaces/{namespace}/sites/{site}"
        self.record = record
        self.archive = Archive()
        self.site = self._get()

    def _get(self) -> dict[str, Any]:
        response = self.http.get(self.url)
        response.raise_for_status()
        SITE_BYTES.set(len(response.content))
        return response.json()

    def handle(self, readings: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        """Record one batch; return the HTTP code for the devices and what happened."""
        RECEIVED.inc(len(readings))
        for _ in range(5):  # a conflict means someone else wrote the Site: read it again and redo the batch
            self.archive.begin()
            try:
                status = self.record(copy.deepcopy(self.site.get("status") or {}), copy.deepcopy(readings),
                                     self.archive)
            except Exception as err:  # noqa: BLE001 - the learner's code: report, keep serving
                self.archive.end(keep=False)
                FAILED.inc()
                print(f"record function failed: {type(err).__name__}: {err}", flush=True)
                traceback.print_exc(file=sys.stdout)
                return 500, {"written": False, "message": f"record function failed: {err}"}
            try:
                response = self.http.put(f"{self.url}/status", json={**self.site, "status": status})
            except httpx.HTTPError as err:  # the API server is restarting, or gone: this batch saves nothing
                self.archive.end(keep=False)
                WRITES.labels("unanswered", "").inc()
                print(f"status update got no answer: {type(err).__name__}: {err}", flush=True)
                return 503, {"written": False, "message": f"the API server did not answer: {err}"}
            WRITES.labels("written" if response.is_success else "refused", str(response.status_code)).inc()
            self.archive.end(keep=response.is_success)
            if response.is_success:
                self.site = response.json()
                SITE_BYTES.set(len(response.content))
                return 200, {"written": True, "received": status.get("received")}
            message = response.json().get("message", response.text) if response.content else ""
            if response.status_code == 409:
                self.site = self._get()
                continue
            print(f"status update refused: HTTP {response.status_code}: {message}", flush=True)
            return 503, {"written": False, "code": response.status_code, "message": message}
        return 503, {"written": False, "code": 409, "message": "conflicts, five times in a row"}


def serve(recorder: Recorder) -> HTTPServer:
    """The ingest endpoint on a free local port. One batch at a time: the server is single-threaded."""

    class Ingest(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            if self.path != "/readings":
                self.send_error(404)
                return
            readings = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            code, body = recorder.handle(readings)
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:  # quiet: the recorder logs what matters itself
            pass

    return HTTPServer(("127.0.0.1", 0), Ingest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="inventory")
    parser.add_argument("--site", default="harbour")
    parser.add_argument("--record", type=Path, default=Path(__file__).with_name("record_history.py"))
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    record = load_record(args.record)
    recorder = Recorder(args.namespace, args.site, record)
    serve_metrics()
    server = serve(recorder)
    print(f"ingest: http://127.0.0.1:{server.server_port}/readings", flush=True)
    print(f"recording readings for {args.namespace}/{args.site} with {record.__name__}() from {args.record}",
          flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
