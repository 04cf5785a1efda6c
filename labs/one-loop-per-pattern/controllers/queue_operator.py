"""The queue operator: one custom resource (QueueWorker), two patterns, run two ways.

- Composite: for each QueueWorker, create and own a Deployment ``<name>-worker`` with its image.
- Governor: keep that Deployment's size at ceil(queue length / itemsPerReplica), through /scale.

``--mode separate`` runs the two as separate control loops. Each has its own logger, its own
condition on the QueueWorker (Composed, Governed), its own field manager, and its own series of the
Prometheus counter ``queue_operator_reconciles_total{loop=...}``. A failure in one leaves the other
working, and every signal says which one failed.

``--mode tangled`` runs the same work as one loop with one condition (Ready), one field manager and
one counter series: the first error stops the whole pass for that object, and nothing says which
half of the work it belonged to.

Both modes keep no state of their own: each pass recomputes from the cluster, so the operator
converges after being killed and restarted.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import math
import sys
from typing import Any

import kr8s.asyncio
from kr8s import ServerError
from prometheus_client import CollectorRegistry, Counter, start_http_server

from krmcourse.controllerkit import controller_main, log_to_stdout

GROUP_VERSION = "ops.krmcourse.dev/v1"
MANAGER = "queue-operator"
REGISTRY = CollectorRegistry()
RECONCILES = Counter(
    "queue_operator_reconciles",
    "Reconcile passes over one QueueWorker, by control loop and result.",
    ["loop", "result"],
    registry=REGISTRY,
)


class SignalError(Exception):
    """The queue ConfigMap is missing or does not hold a usable length."""


class Client:
    """The few REST calls the loops make, with explicit verbs so that RBAC can stay small."""

    def __init__(self, api: kr8s.asyncio.Api, namespace: str) -> None:
        self.api = api
        self.namespace = namespace

    async def _json(self, method: str, version: str, url: str, **kwargs: Any) -> dict[str, Any]:
        base = "" if version == "v1" else "/apis"
        async with self.api.call_api(
            method, version=version, base=base, namespace=self.namespace, url=url, **kwargs
        ) as response:
            result: dict[str, Any] = response.json()
        return result

    async def queue_workers(self) -> list[dict[str, Any]]:
        return list((await self._json("GET", GROUP_VERSION, "queueworkers"))["items"])

    async def deployment(self, name: str) -> dict[str, Any] | None:
        try:
            return await self._json("GET", "apps/v1", f"deployments/{name}")
        except ServerError as exc:
            if exc.response is not None and exc.response.status_code == 404:
                return None
            raise

    async def apply(self, version: str, url: str, body: dict[str, Any], manager: str) -> dict[str, Any]:
        """Server-side apply: send only the fields this manager means to own."""
        return await self._json(
            "PATCH",
            version,
            url,
            params={"fieldManager": manager, "force": "true"},
            headers={"Content-Type": "application/apply-patch+yaml"},
            content=json.dumps(body),
        )

    async def queue_length(self, name: str) -> int:
        try:
            data = (await self._json("GET", "v1", f"configmaps/{name}")).get("data") or {}
        except ServerError as exc:
            raise SignalError(f"cannot read queue ConfigMap {name}: {exc}") from exc
        raw = data.get("length")
        try:
            length = int(str(raw))
        except ValueError:
            raise SignalError(f"queue ConfigMap {name} has length {raw!r}, which is not a number") from None
        if length < 0:
            raise SignalError(f"queue ConfigMap {name} has a negative length {length}")
        return length

    async def scale(self, name: str, replicas: int, manager: str) -> int:
        """Set the size through /scale; returns the size before."""
        url = f"deployments/{name}/scale"
        before = int((await self._json("GET", "apps/v1", url))["spec"].get("replicas", 0))
        if before != replicas:
            await self._json(
                "PATCH",
                "apps/v1",
                url,
                params={"fieldManager": manager},
                headers={"Content-Type": "application/merge-patch+json"},
                content=json.dumps({"spec": {"replicas": replicas}}),
            )
        return before

    async def set_condition(
        self, worker: dict[str, Any], kind: str, ok: bool, reason: str, message: str, manager: str
    ) -> None:
        """Apply one condition to status as ``manager``; the list is a map keyed by type, so the
        other loop's condition stays untouched. Skipped when nothing would change."""
        meta = worker["metadata"]
        status = "True" if ok else "False"
        old = next((c for c in (worker.get("status") or {}).get("conditions", []) if c["type"] == kind), None)
        same = old is not None and old["status"] == status
        if (
            same
            and old["reason"] == reason
            and old.get("message") == message
            and (old.get("observedGeneration") == meta["generation"])
        ):
            return
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        condition = {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "observedGeneration": meta["generation"],
            "lastTransitionTime": old["lastTransitionTime"] if same and old else now,
        }
        body = {
            "apiVersion": GROUP_VERSION,
            "kind": "QueueWorker",
            "metadata": {"name": meta["name"], "namespace": self.namespace},
            "status": {"conditions": [condition]},
        }
        await self.apply(GROUP_VERSION, f"queueworkers/{meta['name']}/status", body, manager)


def deployment_for(worker: dict[str, Any], replicas: int | None = None) -> dict[str, Any]:
    """The Deployment a QueueWorker composes; ``replicas`` only in tangled mode, which owns both."""
    meta = worker["metadata"]
    labels = {"app": f"{meta['name']}-worker", "ops.krmcourse.dev/queueworker": meta["name"]}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "worker", "image": worker["spec"]["image"]}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    owner = {
        "apiVersion": GROUP_VERSION,
        "kind": "QueueWorker",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{meta['name']}-worker", "labels": labels, "ownerReferences": [owner]},
        "spec": spec,
    }


def desired_replicas(length: int, spec: dict[str, Any]) -> int:
    return max(1, min(spec.get("maxReplicas", 10), math.ceil(length / spec.get("itemsPerReplica", 5))))


def up_to_date(current: dict[str, Any] | None, worker: dict[str, Any]) -> bool:
    if current is None:
        return False
    containers = current["spec"]["template"]["spec"]["containers"]
    owners = current["metadata"].get("ownerReferences", [])
    image_ok = bool(containers) and containers[0]["image"] == worker["spec"]["image"]
    return image_ok and any(o["uid"] == worker["metadata"]["uid"] for o in owners)


class Loop:
    """One named control loop: a pass over every QueueWorker, a logger, a counter series."""

    name = "loop"

    def __init__(self, client: Client) -> None:
        self.client = client
        self.log = logging.getLogger(self.name)
        self.manager = f"{MANAGER}/{self.name}" if self.name != "tangled" else MANAGER
        self._last: dict[str, str] = {}

    def note(self, worker: str, message: str, error: bool = False) -> None:
        """Log a line only when what this loop has to say about ``worker`` changes."""
        if self._last.get(worker) != message:
            self._last[worker] = message
            (self.log.error if error else self.log.info)("%s/%s: %s", self.client.namespace, worker, message)

    async def reconcile(self, worker: dict[str, Any]) -> None:
        raise NotImplementedError

    async def run(self, period: float) -> None:
        self.log.info("started in namespace %s", self.client.namespace)
        while True:
            try:
                workers = await self.client.queue_workers()
            except Exception as exc:  # noqa: BLE001 - keep looping through API hiccups
                self.log.error("cannot list QueueWorkers: %s", exc)
                workers = []
            for worker in workers:
                name = worker["metadata"]["name"]
                try:
                    await self.reconcile(worker)
                except Exception as exc:  # noqa: BLE001 - one object's failure must not stop the pass
                    RECONCILES.labels(self.name, "error").inc()
                    self.note(name, f"reconcile failed: {exc}", error=True)
                else:
                    RECONCILES.labels(self.name, "ok").inc()
            await asyncio.sleep(period)


class CompositeLoop(Loop):
    name = "composite"

    async def reconcile(self, worker: dict[str, Any]) -> None:
        name = worker["metadata"]["name"]
        current = await self.client.deployment(f"{name}-worker")
        if not up_to_date(current, worker):
            body = deployment_for(worker)
            await self.client.apply("apps/v1", f"deployments/{name}-worker", body, self.manager)
            self.note(name, f"{'created' if current is None else 'updated'} deployment {name}-worker")
        await self.client.set_condition(
            worker, "Composed", True, "DeploymentReady", f"deployment {name}-worker is in place", self.manager
        )


class GovernorLoop(Loop):
    name = "governor"

    async def reconcile(self, worker: dict[str, Any]) -> None:
        name = worker["metadata"]["name"]
        try:
            length = await self.client.queue_length(worker["spec"]["queue"])
        except SignalError as exc:
            await self.client.set_condition(
                worker, "Governed", False, "BadQueueSignal", str(exc), self.manager
            )
            raise
        if await self.client.deployment(f"{name}-worker") is None:
            message = f"waiting for deployment {name}-worker"
            await self.client.set_condition(worker, "Governed", False, "TargetMissing", message, self.manager)
            self.note(name, message)
            return
        desired = desired_replicas(length, worker["spec"])
        before = await self.client.scale(f"{name}-worker", desired, self.manager)
        if before != desired:
            self.log.info(
                "%s/%s: scaled %s-worker %d -> %d", self.client.namespace, name, name, before, desired
            )
        self.note(name, f"queue {length}: {name}-worker at {desired} replicas")
        message = f"queue length {length}, {desired} replicas"
        await self.client.set_condition(worker, "Governed", True, "Scaled", message, self.manager)


class TangledLoop(Loop):
    """Both patterns in one reconcile function: the way operators often start."""

    name = "tangled"

    async def reconcile(self, worker: dict[str, Any]) -> None:
        name = worker["metadata"]["name"]
        try:
            length = await self.client.queue_length(worker["spec"]["queue"])
            desired = desired_replicas(length, worker["spec"])
            body = deployment_for(worker, replicas=desired)
            await self.client.apply("apps/v1", f"deployments/{name}-worker", body, self.manager)
        except Exception as exc:
            await self.client.set_condition(worker, "Ready", False, "ReconcileError", str(exc), self.manager)
            raise
        self.note(name, f"deployment {name}-worker at {desired} replicas")
        await self.client.set_condition(worker, "Ready", True, "Reconciled", "all good", self.manager)


async def run(mode: str, namespace: str, period: float) -> None:
    client = Client(await kr8s.asyncio.api(), namespace)
    loops: list[Loop] = (
        [CompositeLoop(client), GovernorLoop(client)] if mode == "separate" else [TangledLoop(client)]
    )
    await asyncio.gather(*(loop.run(period) for loop in loops))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["separate", "tangled"], required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--metrics-port", type=int, required=True, help="serves /metrics on 127.0.0.1")
    parser.add_argument("--period", type=float, default=1.0, help="seconds between passes of each loop")
    args = parser.parse_args(argv)
    if args.period <= 0:
        parser.error("--period must be positive")
    log_to_stdout("%(asctime)s [%(name)s] %(message)s")
    start_http_server(args.metrics_port, addr="127.0.0.1", registry=REGISTRY)
    logging.getLogger("operator").info(
        "mode %s, metrics on http://127.0.0.1:%d/metrics", args.mode, args.metrics_port
    )
    controller_main(run(args.mode, args.namespace, args.period))
    return 0


if __name__ == "__main__":
    sys.exit(main())
