"""A small level-triggered control loop, shared by this lab's reference controllers.

Why a periodic full pass instead of watches: the point of this lab is the relationship between two
kinds, not informer plumbing (notebook 03 builds that). A pass that lists everything and reconciles
every object is level-triggered by construction, so a controller that is killed and restarted at any
moment simply finishes the work on its next pass. The lists are small, so the cost stays low.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import kr8s
from kr8s.objects import APIObject

log = logging.getLogger("controller")


def connect() -> kr8s.Api:
    """A sync kr8s client bound to the kubeconfig this process was started with (least privilege)."""
    # kr8s warns about any Kubernetes newer than it was tested with; the calls used here are stable.
    warnings.filterwarnings("ignore", message="Kubernetes version")
    path = os.environ.get("KUBECONFIG")
    if not path:
        sys.exit("KUBECONFIG is not set: start this controller with lab.run_controller(...).")
    return kr8s.api(kubeconfig=path)


def objects(api: kr8s.Api, resource: str, namespace: Any = kr8s.ALL) -> Iterator[APIObject]:
    """Every object of one resource type (for example 'apps.twins.krmcourse.dev')."""
    yield from api.get(resource, namespace=namespace)


def raw(obj: APIObject) -> dict[str, Any]:
    """A plain dict copy of the object, so logic modules stay free of kr8s types."""
    return obj.raw.to_dict() if hasattr(obj.raw, "to_dict") else dict(obj.raw)


def condition(type_: str, ok: bool, reason: str, message: str, generation: int | None) -> dict[str, Any]:
    """A metav1.Condition-shaped dict; lastTransitionTime is set by set_status only when status flips."""
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": generation or 0,
    }


def merge_conditions(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep lastTransitionTime when a condition's status did not change (the Kubernetes convention)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    by_type = {c.get("type"): c for c in old}
    merged = []
    for cond in new:
        before = by_type.get(cond["type"])
        keep = before is not None and before.get("status") == cond["status"]
        merged.append({**cond, "lastTransitionTime": before["lastTransitionTime"] if keep else now})
    return merged


def same_status(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Compare two statuses ignoring condition timestamps, to avoid writing when nothing changed."""

    def strip(status: dict[str, Any]) -> dict[str, Any]:
        out = dict(status)
        out["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions", [])
        ]
        return out

    return strip(old) == strip(new)


def put_status(obj: APIObject, status: dict[str, Any]) -> None:
    """Replace the whole status (a JSON patch), so fields that no longer apply really go away.

    A merge patch would keep any key that the new status leaves out.
    """
    obj.patch([{"op": "add", "path": "/status", "value": status}], subresource="status", type="json")


def run(name: str, reconcile_all: Callable[[kr8s.Api], None], interval: float = 0.5) -> None:
    """Run reconcile_all until SIGTERM/SIGINT; errors are logged and retried on the next pass."""
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(message)s", stream=sys.stdout)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request drowns the story
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    api = connect()
    log.info("started")
    first = True
    while not stopping:
        try:
            reconcile_all(api)
            if first:
                log.info("first pass done")
                first = False
        except Exception as exc:  # noqa: BLE001 - a controller must survive any single failure
            log.warning("pass failed, retrying: %s: %s", type(exc).__name__, exc)
        time.sleep(interval)
    log.info("stopped")
