"""A small level-triggered control loop, woken by watches, shared by the Part IV reference controllers.

Why this shape. Part IV is about the relationship between two kinds, not informer plumbing
(notebook 03 builds that). So the work itself is one *pass*: list every object involved and
reconcile each one against the world as it is now. A pass is level-triggered by construction, so
a controller that is killed and restarted at any moment simply finishes the work on its next pass.

When a pass runs is what this module decides, and it is not a timer:

* once at start;
* whenever a watch on any of the controller's resource types delivers an event. A burst of events
  (an `kubectl apply` of ten objects, or our own status writes) is coalesced: the loop waits a
  moment after the first event, then runs one pass for all of them;
* as a safety net, every ``resync`` seconds (30 by default) with no event at all.

Watches wake the loop; the slow resync is not the mechanism (concept G3, notebook 32). Re-listing
everything twice a second would be the polling that Part V teaches against: it hides missing
watches and missed events, and it costs the API server a list per type per tick for nothing. A
controller whose desired state changes with time alone (a deadline, a backoff) asks for that
explicitly with ``requeue_after``, like controller-runtime's ``RequeueAfter``.

Each watcher follows the informer recipe, because a kr8s watch can end silently and can retry a
410 Gone with the same expired resourceVersion forever: list to learn a resourceVersion, watch
from it, resume from the last seen resourceVersion when the stream ends, and re-list (and wake a
pass, since events may have been missed) after a 410 or any error.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import kr8s
import kr8s.asyncio
from kr8s.objects import APIObject

from . import controllerkit

log = logging.getLogger("controller")
# Why each pass ran (start, events, resync, requeue, retry). DEBUG, so the controllers' logs shown
# in notebooks keep telling their own story; a test turns it on to see the mechanism.
trace = logging.getLogger("controller.passloop")

COALESCE_SECONDS = 0.1  # after the first event, wait this long for the rest of the burst
STOP_CHECK_SECONDS = 0.2  # how often the idle loop looks at its own stop flag (no API calls)


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
    # Without raw=True, kr8s yields APIObjects only (its annotation also allows the raw dicts).
    yield from cast("Iterator[APIObject]", api.get(resource, namespace=namespace))


def raw(obj: APIObject) -> dict[str, Any]:
    """A plain dict copy of the object, so logic modules stay free of kr8s types."""
    return obj.raw.to_dict() if hasattr(obj.raw, "to_dict") else dict(obj.raw)




def put_status(obj: APIObject, status: dict[str, Any]) -> None:
    """Replace the whole status (a JSON patch), so fields that no longer apply really go away.

    A merge patch would keep any key that the new status leaves out.
    """
    obj.patch([{"op": "add", "path": "/status", "value": status}], subresource="status", type="json")


async def _watch_forever(resource: str, wake: threading.Event, ready: threading.Event) -> None:
    """List, then watch ``resource`` in all namespaces, and set ``wake`` on every change; never returns.

    Runs on its own event loop in its own thread, with its own async client (kr8s clients are bound
    to the loop that made them). The list+watch loop itself is the toolkit's
    (:func:`krmcourse.controllerkit.list_then_watch`).
    """
    while True:  # the API server may not answer yet (restarting): ask again, as the watch itself would
        try:
            api = await kr8s.asyncio.api(kubeconfig=os.environ["KUBECONFIG"])
            res = await controllerkit.lookup(api, resource)
            break
        except Exception as exc:  # noqa: BLE001 - a watcher must outlive any single failure
            log.warning("cannot look %s up yet (%s: %s); again in 1 s", resource, type(exc).__name__, exc)
            await asyncio.sleep(1)
    client = controllerkit.Client(api)
    async for kind, obj in controllerkit.list_then_watch(client, res):
        if kind == "LIST":
            trace.debug("%s: listed at resourceVersion %s", resource, obj["metadata"].get("resourceVersion"))
            if ready.is_set():  # a re-list: changes may have slipped by while we were not watching
                wake.set()
            ready.set()
        else:
            trace.debug("%s: %s %s", resource, kind, obj["metadata"]["name"])
            wake.set()


def _start_watcher(resource: str, wake: threading.Event) -> threading.Event:
    """Start one daemon thread watching ``resource``; the returned event is set after its first list."""
    ready = threading.Event()
    thread = threading.Thread(
        target=lambda: asyncio.run(_watch_forever(resource, wake, ready)),
        name=f"watch-{resource}",
        daemon=True,
    )
    thread.start()
    return ready


def run(
    name: str,
    reconcile_all: Callable[[kr8s.Api], None],
    watch: Sequence[str],
    *,
    resync: float = 30.0,
    requeue_after: float | None = None,
) -> None:
    """Run level-triggered passes of ``reconcile_all`` until SIGTERM/SIGINT.

    ``watch`` names every resource type whose changes can change what a pass does (for example
    ``["databases.claims.krmcourse.dev", "databaseclaims.claims.krmcourse.dev"]``, or ``"jobs.batch"``
    for a controller that waits on Jobs). A pass runs at start, after every burst of watch events,
    after ``requeue_after`` seconds if given (for state that changes with time alone), and after
    ``resync`` seconds without any of those. A failed pass is logged and retried with backoff.
    """
    if isinstance(watch, str) or not watch:
        raise ValueError("run(watch=...) needs a list of resource types, e.g. ['apps.twins.krmcourse.dev']")
    if resync <= 0 or (requeue_after is not None and requeue_after <= 0):
        raise ValueError("resync and requeue_after must be positive numbers of seconds")
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
    wake = threading.Event()
    readies = [_start_watcher(resource, wake) for resource in watch]
    for resource, ready in zip(watch, readies, strict=True):
        # Watching before the first pass means nothing that changes during it can be missed.
        if not ready.wait(timeout=30):
            log.warning("watch of %s is not established yet; the resync will cover it", resource)
    wake.clear()  # the first pass below reads everything the initial lists saw
    reason, failures, first = "start", 0, True
    while not stopping:
        trace.debug("pass (%s)", reason)
        try:
            reconcile_all(api)
            failures = 0
            if first:
                log.info("first pass done")
                first = False
        except Exception as exc:  # noqa: BLE001 - a controller must survive any single failure
            failures += 1
            log.warning("pass failed, retrying: %s: %s", type(exc).__name__, exc)
        now = time.monotonic()
        deadlines = {"resync": now + resync}
        if requeue_after is not None:
            deadlines["requeue"] = now + requeue_after
        if failures:
            deadlines["retry"] = now + min(0.5 * 2 ** (failures - 1), resync)
        reason = min(deadlines, key=deadlines.__getitem__)
        due = deadlines[reason]
        while not stopping:
            left = due - time.monotonic()
            if left <= 0:
                break
            # Short waits only so SIGTERM is noticed promptly; nothing here talks to the API server.
            if wake.wait(timeout=min(left, STOP_CHECK_SECONDS)):
                time.sleep(COALESCE_SECONDS)  # let the rest of the burst arrive
                wake.clear()  # cleared before the pass: events during it wake the next one
                reason = "events"
                break
    log.info("stopped")
