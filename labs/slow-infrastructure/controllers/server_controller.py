"""The Server controller: drives slow bare-metal work from a declarative API, two ways.

The state machine lives in `status.state`::

    (new) -> Registering -> Inspecting -> Provisioning -> Provisioned        Error (terminal)

* **Registering**: register the host with the metal service (a quick, idempotent call).
* **Inspecting**: ask the service to inspect the host; it takes minutes. Nobody waits: the service
  calls back, the callback goes onto the work queue (a channel source), and a requeue-after is the
  safety net in case the callback is lost (the controller was down, say).
* **Provisioning**: writing the image is long work, handed to a batch/v1 Job that the controller
  creates and watches; the Job's completion wakes the Server up through the Job watch.

With `--blocking`, each reconcile instead waits, inside the reconcile, until its server is done. One
worker (controller-runtime's default is one reconcile at a time per controller) then serves one server
at a time, and every other server waits. That is the anti-pattern the notebook measures.

The controller reads Servers and Jobs from its own watch-fed cache, writes only Server status and Jobs,
and never lets the metal service near the API.

Run: python server_controller.py --metal URL --callback-port PORT [--blocking] [--namespace dc1]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import kr8s.asyncio

from krmcourse.controllerkit import WorkQueue  # client-go's rules: a key at most once, never twice at a time

warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")

GROUP_VERSION = "metal.krmcourse.dev/v1alpha1"
SERVER_LABEL = "metal.krmcourse.dev/server"
TERMINAL = ("Provisioned", "Error")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def log(message: str) -> None:
    print(f"{now()[11:23]} {message}", flush=True)


class Controller:
    def __init__(self, api: kr8s.asyncio.Api, args: argparse.Namespace) -> None:
        self.api = api
        self.namespace: str = args.namespace
        self.blocking: bool = args.blocking
        self.requeue_after: float = args.requeue_after
        self.work_seconds: float = args.work_seconds
        self.metal = httpx.AsyncClient(base_url=args.metal, timeout=10)
        self.callback_url = f"http://127.0.0.1:{args.callback_port}/events" if args.callback_port else None
        self.queue = WorkQueue()
        self.servers: dict[str, dict[str, Any]] = {}  # the cache: key -> latest object seen
        self.jobs: dict[str, dict[str, Any]] = {}

    # --- sources: watches, the callback channel, timers ----------------------------------------------
    async def inform(
        self,
        version: str,
        plural: str,
        store: dict[str, dict[str, Any]],
        to_key: Callable[[dict[str, Any]], str | None],
        selector: str | None = None,
    ) -> None:
        """List, then watch from the list's resourceVersion; re-list whenever the watch ends or fails."""
        params = {"labelSelector": selector} if selector else {}
        while True:
            try:
                async with self.api.call_api(
                    "GET", version=version, namespace=self.namespace, url=plural, params=params
                ) as response:
                    listing = response.json()
                store.clear()
                for obj in listing["items"]:
                    self._observe(store, to_key, obj, deleted=False)
                watch = {
                    **params,
                    "watch": "true",
                    "allowWatchBookmarks": "true",
                    "timeoutSeconds": "240",
                    "resourceVersion": listing["metadata"]["resourceVersion"],
                }
                async with self.api.call_api(
                    "GET",
                    version=version,
                    namespace=self.namespace,
                    url=plural,
                    params=watch,
                    stream=True,
                    timeout=None,
                ) as response:
                    async for line in response.aiter_lines():
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            break
                        if event["type"] != "BOOKMARK":
                            self._observe(store, to_key, event["object"], deleted=event["type"] == "DELETED")
            except Exception as err:  # noqa: BLE001 - log, back off, re-list
                log(f"watch {plural}: {type(err).__name__}: {err}; re-listing in 1 s")
                await asyncio.sleep(1)

    def _observe(
        self,
        store: dict[str, dict[str, Any]],
        to_key: Callable[[dict[str, Any]], str | None],
        obj: dict[str, Any],
        deleted: bool,
    ) -> None:
        name = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        if deleted:
            store.pop(name, None)
        else:
            store[name] = obj
        key = to_key(obj)
        if key:
            self.queue.add(key)

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
                if self.blocking:
                    await self.reconcile_blocking(key)
                else:
                    after = await self.reconcile(key)
                    if after is not None:
                        self.queue.add_after(key, after)
            except Exception as err:  # noqa: BLE001 - retry with a pause, like a rate-limited requeue
                log(f"reconcile {key}: {type(err).__name__}: {err}; retrying in 1 s")
                self.queue.add_after(key, 1.0)
            finally:
                self.queue.done(key)

    async def reconcile(self, key: str) -> float | None:
        """One short step of the state machine. Returns seconds until it should look again, or None."""
        obj = self.servers.get(key)
        if obj is None:
            return None  # deleted; releasing the host in the metal service is left out of this lab
        namespace, name = key.split("/")
        status = obj.get("status", {})
        state = status.get("state")
        host_id = f"{namespace}.{name}"
        if not state:
            await self.patch_status(
                key, {"state": "Registering", "operationHistory": {"register": {"start": now()}}}
            )
        elif state == "Registering":
            (await self.metal.post("/hosts", json={"id": host_id})).raise_for_status()
            await self.patch_status(
                key,
                {
                    "state": "Inspecting",
                    "hostID": host_id,
                    "operationHistory": {"register": {"end": now()}, "inspect": {"start": now()}},
                },
            )
        elif state == "Inspecting":
            response = await self.metal.get(f"/hosts/{host_id}")
            response.raise_for_status()
            host = response.json()
            if host["state"] == "registered":
                body = {"callback": self.callback_url} if self.callback_url else {}
                (await self.metal.post(f"/hosts/{host_id}/inspect", json=body)).raise_for_status()
                log(
                    f"{key}: inspection started; waiting for the callback (check again in {self.requeue_after} s)"
                )
                return self.requeue_after
            if host["state"] == "inspecting":
                return self.requeue_after
            job = f"{name}-provision"
            await self.patch_status(
                key,
                {
                    "state": "Provisioning",
                    "hardware": host.get("hardware"),
                    "job": job,
                    "operationHistory": {"inspect": {"end": now()}, "provision": {"start": now()}},
                },
            )
        elif state == "Provisioning":
            job = self.jobs.get(f"{namespace}/{status['job']}")
            if job is None:
                await self.create_job(obj)
                return None  # the Job watch brings us back when it changes
            conditions = {c["type"]: c["status"] for c in job.get("status", {}).get("conditions", [])}
            if conditions.get("Complete") == "True":
                await self.patch_status(
                    key,
                    {
                        "state": "Provisioned",
                        "message": f"image {obj['spec'].get('image')}",
                        "operationHistory": {"provision": {"end": now()}},
                    },
                )
            elif conditions.get("Failed") == "True":
                await self.patch_status(key, {"state": "Error", "message": f"Job {status['job']} failed"})
        return None

    async def reconcile_blocking(self, key: str) -> None:
        """The anti-pattern: keep stepping, and wait in between, until this one server is finished."""
        while True:
            await self.reconcile(key)
            obj = self.servers.get(key)
            if obj is None or obj.get("status", {}).get("state") in TERMINAL:
                return
            await asyncio.sleep(0.2)  # ...wait, wait, wait, while every other Server waits for this worker

    # --- writes --------------------------------------------------------------------------------------
    async def patch_status(self, key: str, status: dict[str, Any]) -> None:
        namespace, name = key.split("/")
        status = {**status, "observedGeneration": self.servers[key]["metadata"].get("generation", 0)}
        async with self.api.call_api(
            "PATCH",
            version=GROUP_VERSION,
            namespace=namespace,
            url=f"servers/{name}/status",
            content=json.dumps({"status": status}),
            headers={"Content-Type": "application/merge-patch+json"},
        ) as response:
            self.servers[key] = response.json()  # write-through, so the next step sees its own write
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
                "ownerReferences": [
                    {
                        "apiVersion": GROUP_VERSION,
                        "kind": "Server",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                    }
                ],
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
    log(
        f"server controller: namespace {args.namespace}, {'BLOCKING' if args.blocking else 'non-blocking'}, "
        f"{args.workers} worker(s), callbacks {controller.callback_url or 'off'}"
    )

    def job_owner(job: dict[str, Any]) -> str | None:
        owner = job["metadata"].get("labels", {}).get(SERVER_LABEL)
        return f"{job['metadata']['namespace']}/{owner}" if owner else None

    def server_key(obj: dict[str, Any]) -> str:
        return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"

    tasks = [
        asyncio.create_task(controller.inform(GROUP_VERSION, "servers", controller.servers, server_key)),
        asyncio.create_task(controller.inform("batch/v1", "jobs", controller.jobs, job_owner, SERVER_LABEL)),
        *(asyncio.create_task(controller.work()) for _ in range(args.workers)),
    ]
    await asyncio.gather(*tasks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metal", required=True, help="the metal service's URL")
    parser.add_argument("--namespace", default="dc1")
    parser.add_argument("--callback-port", type=int, default=0, help="serve callbacks here (0: no callbacks)")
    parser.add_argument("--blocking", action="store_true", help="wait inside reconcile (the anti-pattern)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--requeue-after",
        type=float,
        default=10.0,
        help="seconds before looking at an unfinished inspection again",
    )
    parser.add_argument(
        "--work-seconds", type=float, default=2.0, help="how long each image-writing Job runs"
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
