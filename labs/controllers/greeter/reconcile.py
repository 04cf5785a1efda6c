"""The reconcile: observe, compare, act, report. Level-triggered and idempotent.

It is handed a key's *current* state (from the cache), never the event that woke it up, so it does
not matter how many events were merged, missed or replayed: it compares what is with what should be
and closes the gap. Running it again on a converged object writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from kr8s.asyncio import Api

from . import actions
from .model import (
    FINALIZER,
    Obj,
    configmap_differs,
    configmap_name,
    desired_configmap,
    desired_status,
    key_of,
    render,
)

GetConfigMap = Callable[[str, str], Awaitable[Obj | None]]


async def reconcile(api: Api, greeting: Obj, get_configmap: GetConfigMap, manager: str, log: logging.Logger) -> str:
    """Bring one existing Greeting's world in line with its spec; return a one-word summary."""
    meta = greeting["metadata"]
    namespace, name = key_of(greeting)

    # Deleting: clean up what garbage collection cannot reach, then let the object go.
    if meta.get("deletionTimestamp"):
        if FINALIZER not in meta.get("finalizers", []):
            return "deleting"  # not ours to hold; another finalizer keeps it
        await actions.set_index_entry(api, greeting, None, manager)
        await actions.record_event(api, greeting, "CleanedUp", "removed the index entry", manager)
        await actions.remove_finalizer(api, greeting, manager)
        log.info("%s/%s: cleaned up the index entry and removed the finalizer", namespace, name)
        return "finalized"

    changed = False
    # A finalizer first, before anything exists that would need cleaning up.
    if FINALIZER not in meta.get("finalizers", []):
        changed = True
        greeting = await actions.add_finalizer(api, greeting, manager)
        log.info("%s/%s: added finalizer %s", namespace, name, FINALIZER)

    message, problem = render(greeting)
    if message is not None:
        desired = desired_configmap(greeting, message)
        actual = await get_configmap(namespace, configmap_name(greeting))
        if actual is None or configmap_differs(actual, desired):
            did = await actions.create_or_patch_configmap(api, actual, desired, manager)
            changed = True
            await actions.record_event(
                api,
                greeting,
                "ConfigMap" + did.capitalize(),
                f"{did} ConfigMap {configmap_name(greeting)}",
                manager,
            )
            log.info("%s/%s: %s ConfigMap %s", namespace, name, did, configmap_name(greeting))
        if await actions.set_index_entry(api, greeting, message, manager):
            changed = True
            log.info("%s/%s: wrote the index entry", namespace, name)

    status = desired_status(greeting, message, problem)
    if status != {k: greeting.get("status", {}).get(k) for k in status}:
        await actions.patch_greeting(api, greeting, {"status": status}, manager, status=True)
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        if ready["status"] == "False":
            await actions.record_event(api, greeting, ready["reason"], ready["message"], manager, warning=True)
        log.info(
            "%s/%s: status Ready=%s (%s) at generation %s",
            namespace,
            name,
            ready["status"],
            ready["reason"],
            status["observedGeneration"],
        )
        changed = True
    return "changed" if changed else "unchanged"
