"""The Server controller: drives slow bare-metal work from a declarative API.

The state machine lives in `status.state`::

    (new) -> Registering -> Inspecting -> Provisioning -> Provisioned        Error (terminal)

The controller owns the machinery: the watches on Servers and Jobs, the work queue, one worker (as
controller-runtime runs one reconcile at a time per controller by default), the status writes, and the
steps at both ends:

* **(new)**: write `Registering`.
* **Registering, Inspecting**: the part that talks to the slow metal service is a function given with
  `--step FILE`, ``step(server, metal) -> {"status": {...}, "requeue_after": seconds}`` (both keys
  optional). It runs in the worker, in a thread: while it runs, the worker does nothing else. The status
  it returns is merge-patched into the Server's status; `requeue_after` brings the Server back after that
  many seconds (0: at once), unless an event comes first. `metal` (class StepMetal) registers, inspects
  and reads hosts.
* **Provisioning**: writing the image is long work, handed to a batch/v1 Job that the controller creates
  and watches; the Job's completion wakes the Server up through the Job watch.

On every change of state the controller stamps `status.operationHistory` (when each operation started
and ended). With `--callback-port`, the metal service calls back when an inspection ends and the
callback puts the Server's key on the work queue (a channel source).

Its own Prometheus metrics (the URL is printed at start) count reconciles, the requests it sends to the
API server, and the reconciles that were still running when an inspection they had seen under way
ended: reconciles that waited for the slow work.

The controller reads Servers and Jobs from its own watch-fed cache, writes only Server status and Jobs,
and never lets the metal service near the API.

Run: python server_controller.py --metal URL --step FILE [--callback-port PORT] [--namespace dc1]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import datetime
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import kr8s.asyncio
from prometheus_client import Counter

from krmcourse.controllerkit import (
    RECONCILES,
    REQUESTS,
    Client,
    Informer,
    Resource,
    WorkQueue,
    controller_main,
    controller_ref,
    key_of,
    log,
    serve_metrics,
)
from krmcourse.labcode import saved_function

GROUP_VERSION = "metal.krmcourse.dev/v1alpha1"
SERVERS = Resource("metal.krmcourse.dev", "v1alpha1", "servers")
JOBS = Resource("batch", "v1", "jobs")
SERVER_LABEL = "metal.krmcourse.dev/server"
TERMINAL = ("Provisioned", "Error")
STEP_STATES = ("Registering", "Inspecting")
OPERATION = {"Registering": "register", "Inspecting": "inspect", "Provisioning": "provision"}
WAITED = Counter(
    "server_controller_reconciles_waited",
    "Reconciles still running when an inspection they had seen under way ended",
)
#: A step only asks the metal service (milliseconds); one that holds the worker longer is waiting.
SLOW_STEP_SECONDS = 1.5
SLOW_STEPS = Counter("server_controller_slow_steps", f"Steps that held the one worker for over {SLOW_STEP_SECONDS} s")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


class StepMetal:
    """What a step may do with the metal service: quick HTTP calls, and one slow convenience.

    It notes every state it sees of each host during one reconcile, so the controller can tell when a
    reconcile was still running as an inspection it had seen under way ended.
    """

    def __init__(self, url: str, callback_url: str | None) -> None:
        self.http = httpx.Client(base_url=url, timeout=10)
        self.callback_url = callback_url
        self.seen: dict[str, list[str]] = {}

    def _note(self, host: dict[str, Any]) -> dict[str, Any]:
        self.seen.setdefault(host["id"], []).append(host["state"])
        return host

    def register(self, server: dict[str, Any]) -> str:
        """Register the Server's host (quick, and safe to repeat); return its id in the metal service."""
        host_id = f"{server['metadata']['namespace']}.{server['metadata']['name']}"
        response = self.http.post("/hosts", json={"id": host_id})
        response.raise_for_status()
        self._note(response.json())
        return host_id

    def inspect(self, host_id: str) -> dict[str, Any]:
        """Start inspecting the host's hardware (quick to ask, minutes to finish; safe to repeat)."""
        body = {"callback": self.callback_url} if self.callback_url else {}
        response = self.http.post(f"/hosts/{host_id}/inspect", json=body)
        response.raise_for_status()
        return self._note(response.json())

    def host(self, host_id: str) -> dict[str, Any]:
        """The host as the metal service sees it now: its state, and its hardware once inspected."""
        response = self.http.get(f"/hosts/{host_id}")
        response.raise_for_status()
        return self._note(response.json())

    def wait_for_inspection(self, host_id: str) -> dict[str, Any]:
        """Wait until the host's inspection has finished, and return its hardware. This takes minutes."""
        while (host := self.host(host_id))["state"] != "inspected":
            time.sleep(0.2)
        return dict(host["hardware"])

    def waited_for(self) -> list[str]:
        """Hosts seen inspecting, then inspected, since the last call: the reconcile waited for them."""
        waited = [h for h, states in self.seen.items()
                  if "inspecting" in states and "inspected" in states[states.index("inspecting"):]]
        self.seen = {}
        return waited


class Controller:
    def __init__(self, api: kr8s.asyncio.Api, args: argparse.Namespace) -> None:
        self.api = api
        self.namespace: str = args.namespace
        self.work_seconds: float = args.work_seconds
        self.callback_url = f"http://127.0.0.1:{args.callback_port}/events" if args.callback_port else None
        self.step = saved_function(Path(args.step), "reconcile")
        self.metal = StepMetal(args.metal, self.callback_url)
        self.queue = WorkQueue()
        client = Client(api)
        # The caches, fed by watches: key -> latest object seen.
        self.server_cache = Informer(client, SERVERS, self.namespace)
        self.job_cache = Informer(client, JOBS, self.namespace, label_selector=SERVER_LABEL)
        self.servers, self.jobs = self.server_cache.store, self.job_cache.store

    # --- sources: watches, the callback channel, timers ----------------------------------------------
    def inform(self, cache: Informer, to_key: Callable[[dict[str, Any]], str | None]) -> Informer:
        """Queue the key ``to_key`` gives for every object the watch-fed ``cache`` sees change."""

        def enqueue(_kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            obj = new if new is not None else old
            key = to_key(obj) if obj is not None else None
            if key:
                self.queue.add(key)

        cache.handlers.append(enqueue)
        return cache

    def serve_callbacks(self, port: int, loop: asyncio.AbstractEventLoop) -> ThreadingHTTPServer:
        """The channel source: an HTTP endpoint whose only effect is to put a key on the work queue."""
        queue = self.queue

        class Callback(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                namespace, _, name = str(body.get("id", "")).partition(".")
                if name:
                    log(f"callback: {body.get('event')} for {namespace}/{name}")
                    loop.call_soon_threadsafe(queue.add, f"{namespace}/{name}")
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                return

        server = ThreadingHTTPServer(("127.0.0.1", port), Callback)
        threading.Thread(target=server.serve_forever, daemon=True, name="callbacks").start()
        return server

    # --- the worker ----------------------------------------------------------------------------------
    async def work(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                after = await self.reconcile(key)
                if after is not None:
                    self.queue.add_after(key, after)
            except Exception as err:  # noqa: BLE001 - retry with a pause, like a rate-limited requeue
                log(f"reconcile {key}: {type(err).__name__}: {err}; retrying in 1 s")
                self.queue.add_after(key, 1.0)
            finally:
                RECONCILES.labels("servers").inc()
                self.queue.done(key)

    async def reconcile(self, key: str) -> float | None:
        """One pass over one Server. Returns seconds until it should look again, or None."""
        obj = self.servers.get(key)
        if obj is None:
            return None  # deleted; releasing the host in the metal service is left out of this lab
        namespace, name = key.split("/")
        status = obj.get("status", {})
        state = status.get("state")
        if not state:
            await self.patch_status(key, {"state": "Registering"})
        elif state in STEP_STATES:
            return await self.run_step(key, obj)
        elif state == "Provisioning":
            job = self.jobs.get(f"{namespace}/{status['job']}")
            if job is None:
                await self.create_job(obj)
                return None  # the Job watch brings us back when it changes
            conditions = {c["type"]: c["status"] for c in job.get("status", {}).get("conditions", [])}
            if conditions.get("Complete") == "True":
                await self.patch_status(
                    key, {"state": "Provisioned", "message": f"image {obj['spec'].get('image')}"}
                )
            elif conditions.get("Failed") == "True":
                await self.patch_status(key, {"state": "Error", "message": f"Job {status['job']} failed"})
        return None

    async def run_step(self, key: str, obj: dict[str, Any]) -> float | None:
        """Hand a Server in Registering or Inspecting to the step; the worker waits for it to return."""
        began = time.monotonic()
        try:
            result = await asyncio.to_thread(self.step, copy.deepcopy(obj), self.metal)
        finally:
            took = time.monotonic() - began
            for host in self.metal.waited_for():
                WAITED.inc()
                log(f"{key}: this reconcile waited {took:.1f} s, until the inspection "
                    f"of {host} ended; every other Server waited for it too")
            if took > SLOW_STEP_SECONDS:
                SLOW_STEPS.inc()
                log(f"{key}: the step held the worker for {took:.1f} s; no other Server was served meanwhile")
        if not isinstance(result, dict) or set(result) - {"status", "requeue_after"}:
            raise TypeError(f"the step returned {result!r}; it should return a dict with the keys "
                            "'status' and/or 'requeue_after'")
        if result.get("status"):
            await self.patch_status(key, dict(result["status"]))
        after = result.get("requeue_after")
        return None if after is None else max(float(after), 0.0)

    # --- writes --------------------------------------------------------------------------------------
    async def patch_status(self, key: str, status: dict[str, Any]) -> None:
        """Merge-patch the status; on a change of state, stamp when one operation ended and the next began."""
        namespace, name = key.split("/")
        obj = self.servers[key]
        old, new = obj.get("status", {}).get("state"), status.get("state")
        if new and new != old:
            history: dict[str, dict[str, str]] = {}
            if old in OPERATION:
                history[OPERATION[old]] = {"end": now()}
            if new in OPERATION:
                history[OPERATION[new]] = {"start": now()}
            status["operationHistory"] = history
            if new == "Provisioning" and not obj.get("status", {}).get("job"):
                status.setdefault("job", f"{name}-provision")
        status = {**status, "observedGeneration": obj["metadata"].get("generation", 0)}
        # A merge patch through the counting client; write-through, so the next step sees its own write.
        self.servers[key] = await self.server_cache.client.patch(SERVERS, namespace, name, {"status": status},
                                                                 subresource="status")
        log(f"{key}: {status['state'] if 'state' in status else 'status updated'}")

    async def create_job(self, server: dict[str, Any]) -> None:
        meta = server["metadata"]
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": server["status"]["job"],
                "namespace": meta["namespace"],
                "labels": {SERVER_LABEL: meta["name"]},
                "ownerReferences": [controller_ref(server, GROUP_VERSION, "Server")],
            },
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {
                        "labels": {SERVER_LABEL: meta["name"]},
                        # There is no container runtime: kwok finishes the pod on this cue, where a real
                        # image writer would exit 0 when the disk is written.
                        "annotations": {
                            "kwok.krmcourse.dev/outcome": "Succeeded",
                            "kwok.krmcourse.dev/after": f"{int(self.work_seconds * 1000)}ms",
                        },
                    },
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "write-image",
                                "image": "image-writer:1.0",
                                "args": [
                                    "--host",
                                    server["status"]["hostID"],
                                    "--image",
                                    server["spec"].get("image", ""),
                                ],
                            }
                        ],
                    },
                },
            },
        }
        REQUESTS.labels("local", "POST", "jobs", "").inc()
        async with self.api.call_api(
            "POST",
            version="batch/v1",
            namespace=meta["namespace"],
            url="jobs",
            content=json.dumps(job),
            raise_for_status=False,
        ) as response:
            if response.status_code not in (201, 409):  # 409: created before a restart; fine
                raise RuntimeError(f"creating Job: HTTP {response.status_code} {response.text[:300]}")
        log(f"{meta['namespace']}/{meta['name']}: Job {job['metadata']['name']} created")


async def run(args: argparse.Namespace) -> None:
    api = await kr8s.asyncio.api(kubeconfig=os.environ.get("KUBECONFIG"))
    controller = Controller(api, args)
    loop = asyncio.get_running_loop()
    if args.callback_port:
        controller.serve_callbacks(args.callback_port, loop)
    serve_metrics()
    log(
        f"server controller: namespace {args.namespace}, step {controller.step.__name__} from {args.step}, "
        f"{args.workers} worker(s), callbacks {controller.callback_url or 'off'}"
    )

    def job_owner(job: dict[str, Any]) -> str | None:
        owner = job["metadata"].get("labels", {}).get(SERVER_LABEL)
        return f"{job['metadata']['namespace']}/{owner}" if owner else None

    tasks = [
        asyncio.create_task(controller.inform(controller.server_cache, key_of).run()),
        asyncio.create_task(controller.inform(controller.job_cache, job_owner).run()),
        *(asyncio.create_task(controller.work()) for _ in range(args.workers)),
    ]
    await asyncio.gather(*tasks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metal", required=True, help="the metal service's URL")
    parser.add_argument("--step", required=True, help="a Python file with the Registering/Inspecting step")
    parser.add_argument("--namespace", default="dc1")
    parser.add_argument("--callback-port", type=int, default=0, help="serve callbacks here (0: no callbacks)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--work-seconds", type=float, default=2.0, help="how long each image-writing Job runs"
    )
    controller_main(run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
