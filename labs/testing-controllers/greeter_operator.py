"""The Greeting operator once more, small enough to test whole: one reconcile function, and kopf to call it.

For each Greeting it keeps a finalizer, one ConfigMap that holds the message (owned by the Greeting, so the
garbage collector removes it), a `Ready` condition with `observedGeneration`, and an Event when the message
changes. ``reconcile(api, greeting)`` is one pass over one Greeting as the caller read it: a test can call it
directly with a client of a real API server, and kopf calls it on every event of a Greeting.

GREETER_BUG switches on one classic bug, so that a test can be seen to catch it:

- ``non-idempotent``: every pass creates a new ConfigMap instead of looking for the one it made before;
- ``status-on-main``: the status is written to the Greeting itself, not to its status subresource;
- ``finalizer-kept``: a deleted Greeting is cleaned up, but the finalizer is never taken off;
- ``conflict-not-retried``: a write refused with 409 Conflict (the Greeting changed since it was read)
  fails the pass instead of reading the Greeting again and retrying;
- ``no-event``: the Event is never posted.
"""

from __future__ import annotations

import json
import os
import warnings
from datetime import UTC, datetime
from typing import Any

import kopf
import kr8s
from kr8s.objects import ConfigMap, Event, new_class

GROUP, VERSION, PLURAL = "controllers.krmcourse.dev", "v1alpha1", "greetings"
FINALIZER = "testing.krmcourse.dev/cleanup"
LABEL = "testing.krmcourse.dev/greeting"  # on the ConfigMap: the name of the Greeting it belongs to
COMPONENT = "greeter-operator"
WORDS = {"en": "Hello", "fr": "Bonjour", "es": "Hola", "nl": "Hallo", "de": "Hallo"}
BUGS = ("non-idempotent", "status-on-main", "finalizer-kept", "conflict-not-retried", "no-event")
BUG = os.environ.get("GREETER_BUG", "")
Greeting = new_class(kind="Greeting", version=f"{GROUP}/{VERSION}", namespaced=True, plural=PLURAL)
warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")


class Conflict(Exception):
    """The API server refused a write: the Greeting changed since it was read (409)."""


def reconcile(api: Any, greeting: dict[str, Any]) -> str:
    """One pass over ``greeting`` (as the caller read it). Returns what it did, in a few words.

    A pass that runs into a 409 reads the Greeting again and starts over, a few times."""
    for _ in range(5):
        try:
            return _pass(api, greeting)
        except Conflict:
            if BUG == "conflict-not-retried":
                raise
            meta = greeting["metadata"]
            try:
                greeting = Greeting.get(meta["name"], namespace=meta["namespace"], api=api).raw
            except kr8s.NotFoundError:
                return "gone"
    raise Conflict(f"{greeting['metadata']['name']}: still conflicting after 5 tries")


def _pass(api: Any, greeting: dict[str, Any]) -> str:
    meta = greeting["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    if meta.get("deletionTimestamp"):
        if FINALIZER not in finalizers:
            return "nothing to clean up"
        _event(api, greeting, "CleanedUp", "cleaned up before deletion")  # (nothing outside the cluster here)
        if BUG != "finalizer-kept":
            _write(api, greeting, {"metadata": {"finalizers": [f for f in finalizers if f != FINALIZER]}})
        return "released the finalizer"
    if FINALIZER not in finalizers:
        greeting = _write(api, greeting, {"metadata": {"finalizers": [*finalizers, FINALIZER]}})
    word = WORDS.get(greeting["spec"].get("language", "en"))
    if word is None:
        ready = ("False", "UnsupportedLanguage",
                 f"language {greeting['spec'].get('language')!r} is not one of {', '.join(sorted(WORDS))}")
    else:
        message = f"{word}, {greeting['spec']['to']}!"
        if _ensure_configmap(api, greeting, message) and BUG != "no-event":
            _event(api, greeting, "Greeted", f"ConfigMap {configmap_name(greeting)} says {message!r}")
        ready = ("True", "Greeted", message)
    _write_status(api, greeting, ready)
    return f"Ready={ready[0]}"


def configmap_name(greeting: dict[str, Any]) -> str:
    return f"greeting-{greeting['metadata']['name']}"


def _ensure_configmap(api: Any, greeting: dict[str, Any], message: str) -> bool:
    """Create or fix the ConfigMap; True when its message changed."""
    meta = greeting["metadata"]
    desired = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": configmap_name(greeting), "namespace": meta["namespace"],
                            "labels": {LABEL: meta["name"]},
                            "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": "Greeting",
                                                 "name": meta["name"], "uid": meta["uid"],
                                                 "controller": True, "blockOwnerDeletion": True}]},
               "data": {"message": message}}
    if BUG == "non-idempotent":  # a new name every pass, and never a look at what is there
        desired["metadata"]["generateName"] = desired["metadata"].pop("name") + "-"
        ConfigMap(desired, api=api).create()
        return True
    try:
        actual = ConfigMap.get(desired["metadata"]["name"], namespace=meta["namespace"], api=api)
    except kr8s.NotFoundError:
        ConfigMap(desired, api=api).create()
        return True
    if (actual.raw.get("data") or {}) == desired["data"]:
        return False
    actual.patch({"data": desired["data"]})
    return True


def _write_status(api: Any, greeting: dict[str, Any], ready: tuple[str, str, str]) -> None:
    status, reason, message = ready
    old = next((c for c in (greeting.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})
    generation = greeting["metadata"]["generation"]
    if ((greeting.get("status") or {}).get("observedGeneration") == generation
            and (old.get("status"), old.get("reason"), old.get("message")) == ready):
        return  # nothing new to say: no write, so no event that wakes this operator again
    since = old["lastTransitionTime"] if old.get("status") == status else _now()
    body = {"status": {"observedGeneration": generation, "configMapName": configmap_name(greeting),
                       "conditions": [{"type": "Ready", "status": status, "reason": reason, "message": message,
                                       "observedGeneration": generation, "lastTransitionTime": since}]}}
    _write(api, greeting, body, subresource=None if BUG == "status-on-main" else "status")


def _write(api: Any, greeting: dict[str, Any], body: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
    """A merge patch that carries the resourceVersion the Greeting was read at: the API server refuses it with
    409 when the Greeting changed since (optimistic concurrency). Returns the Greeting as written."""
    meta = greeting["metadata"]
    body = {**body, "metadata": {**body.get("metadata", {}), "resourceVersion": meta["resourceVersion"]}}
    obj = Greeting(greeting, api=api)
    try:
        obj.patch(body, subresource=subresource)
    except kr8s.ServerError as err:
        if err.response is not None and err.response.status_code == 409:
            raise Conflict(str(err)) from err
        raise
    return obj.raw


def _event(api: Any, greeting: dict[str, Any], reason: str, message: str) -> None:
    meta, now = greeting["metadata"], _now()
    Event({"apiVersion": "v1", "kind": "Event",
           "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
           "involvedObject": {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Greeting", "name": meta["name"],
                              "namespace": meta["namespace"], "uid": meta["uid"]},
           "reason": reason, "message": message, "type": "Normal", "source": {"component": COMPONENT},
           "firstTimestamp": now, "lastTimestamp": now, "count": 1}, api=api).create()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------------- kopf calls reconcile on every event
@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.enabled = False  # the Events are this operator's own
    print(f"greeter operator ready{f' (bug: {BUG})' if BUG else ''}", flush=True)


@kopf.on.event(GROUP, VERSION, PLURAL)
def on_event(type: str, body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    if type == "DELETED":
        return
    greeting = json.loads(json.dumps(body, default=dict))
    logger.info(reconcile(kr8s.api(), greeting))
