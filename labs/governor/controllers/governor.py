"""The queue governor: keeps a Deployment's size in line with the length of a work queue.

It is a governor, not a composite: it never creates the Deployment and holds no ownerReference on
it. It reads a signal (a ConfigMap's ``data.length``) and writes one number, through the
Deployment's ``/scale`` subresource, on a fixed period, as the HorizontalPodAutoscaler does. It is
attached to a workload by a QueueScaler that names it, and detached by deleting that QueueScaler.

Every pass recomputes everything from the cluster (level-triggered), so a governor that is killed
and restarted simply carries on: there is no in-memory state to lose.

Run by the lab with KUBECONFIG set to the ``queue-governor`` ServiceAccount, whose Role grants no
access to Deployments, only to ``deployments/scale``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import math
import sys
from typing import Any

import kr8s.asyncio
from kr8s import ServerError

from krmcourse.controllerkit import controller_main, log_to_stdout

GROUP_VERSION = "autoscaling.krmcourse.dev/v1"
FIELD_MANAGER = "queue-governor"
log = logging.getLogger("governor")


class SignalError(Exception):
    """The queue signal is missing or unreadable; the target is left as it is."""


def desired_replicas(length: int, spec: dict[str, Any]) -> int:
    """ceil(length / itemsPerReplica), kept within [minReplicas, maxReplicas]."""
    wanted = math.ceil(length / spec.get("itemsPerReplica", 5))
    return max(spec.get("minReplicas", 1), min(spec.get("maxReplicas", 10), wanted))


async def queue_length(api: kr8s.asyncio.Api, namespace: str, name: str) -> int:
    try:
        async with api.call_api("GET", namespace=namespace, url=f"configmaps/{name}") as response:
            raw = (response.json().get("data") or {}).get("length")
    except ServerError as exc:
        raise SignalError(f"cannot read queue ConfigMap {namespace}/{name}: {exc}") from exc
    try:
        length = int(str(raw))
    except ValueError:
        raise SignalError(f"queue ConfigMap {namespace}/{name} has length {raw!r}, not a number") from None
    if length < 0:
        raise SignalError(f"queue ConfigMap {namespace}/{name} has a negative length {length}")
    return length


async def scale_of(api: kr8s.asyncio.Api, namespace: str, name: str) -> int:
    async with api.call_api(
        "GET", version="apps/v1", base="/apis", namespace=namespace, url=f"deployments/{name}/scale"
    ) as response:
        return int(response.json()["spec"].get("replicas", 0))


async def set_scale(api: kr8s.asyncio.Api, namespace: str, name: str, replicas: int) -> None:
    """PATCH the /scale subresource, under our own field manager so managedFields name us."""
    async with api.call_api(
        "PATCH",
        version="apps/v1",
        base="/apis",
        namespace=namespace,
        url=f"deployments/{name}/scale",
        params={"fieldManager": FIELD_MANAGER},
        headers={"Content-Type": "application/merge-patch+json"},
        json={"spec": {"replicas": replicas}},
    ):
        pass


async def report(api: kr8s.asyncio.Api, scaler: dict[str, Any], status: dict[str, Any]) -> None:
    """Write status only when it changed, so a steady state costs no writes."""
    current = scaler.get("status") or {}
    if all(current.get(key) == value for key, value in status.items()):
        return
    meta = scaler["metadata"]
    async with api.call_api(
        "PATCH",
        version=GROUP_VERSION,
        base="/apis",
        namespace=meta["namespace"],
        url=f"queuescalers/{meta['name']}/status",
        params={"fieldManager": FIELD_MANAGER},
        headers={"Content-Type": "application/merge-patch+json"},
        json={"status": status},
    ):
        pass


async def govern(api: kr8s.asyncio.Api, scaler: dict[str, Any]) -> None:
    """One pass for one QueueScaler: read the signal, compare, scale if needed, report."""
    meta, spec = scaler["metadata"], scaler["spec"]
    namespace, target = meta["namespace"], spec["targetRef"]["name"]
    try:
        length = await queue_length(api, namespace, spec["queueRef"]["name"])
    except SignalError as exc:
        log.warning("%s/%s: %s; leaving %s alone", namespace, meta["name"], exc, target)
        await report(api, scaler, {"message": str(exc)})
        return
    desired = desired_replicas(length, spec)
    status: dict[str, Any] = {"queueLength": length, "desiredReplicas": desired, "message": "ok"}
    try:
        current = await scale_of(api, namespace, target)
    except ServerError as exc:
        log.warning("%s/%s: target deployment %s: %s", namespace, meta["name"], target, exc)
        await report(api, scaler, {**status, "message": f"cannot read the scale of {target}: {exc}"})
        return
    if current != desired:
        await set_scale(api, namespace, target, desired)
        log.info(
            "scaled %s/%s %d -> %d (queue %d, %d per replica)",
            namespace,
            target,
            current,
            desired,
            length,
            spec.get("itemsPerReplica", 5),
        )
        status["lastScaleTime"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await report(api, scaler, status)


async def run(namespace: str, period: float) -> None:
    api = await kr8s.asyncio.api()
    log.info("governing QueueScalers in namespace %s every %.1fs", namespace, period)
    while True:
        try:
            async with api.call_api(
                "GET", version=GROUP_VERSION, base="/apis", namespace=namespace, url="queuescalers"
            ) as response:
                scalers = response.json()["items"]
            for scaler in scalers:
                try:
                    await govern(api, scaler)
                except ServerError as exc:
                    log.error("%s/%s: %s", namespace, scaler["metadata"]["name"], exc)
        except Exception as exc:  # noqa: BLE001 - a governor keeps governing through API hiccups
            log.error("pass failed: %s", exc)
        await asyncio.sleep(period)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--period", type=float, default=1.0, help="seconds between passes")
    args = parser.parse_args(argv)
    if args.period <= 0:
        parser.error("--period must be positive")
    log_to_stdout()
    controller_main(run(args.namespace, args.period))
    return 0


if __name__ == "__main__":
    sys.exit(main())
