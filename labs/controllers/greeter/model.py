"""What a Greeting should produce: pure functions with no I/O, shared by both controllers.

Keeping the desired state in pure functions is what makes a reconcile idempotent and easy to test:
given the same Greeting, these functions always return the same ConfigMap and the same conditions,
so running the reconcile twice changes nothing the second time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

GROUP = "controllers.krmcourse.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Greeting"
PLURAL = "greetings"

FINALIZER = f"{GROUP}/cleanup"
OWNER_LABEL = f"{GROUP}/greeting"
INDEX_NAMESPACE = "greeting-system"
INDEX_NAME = "greetings-index"

TEMPLATES: dict[str, str] = {
    "de": "Hallo, {to}!",
    "en": "Hello, {to}!",
    "es": "¡Hola, {to}!",
    "fr": "Bonjour, {to} !",
    "nl": "Hallo, {to}!",
}

Obj = dict[str, Any]
Key = tuple[str, str]


def key_of(obj: Obj) -> Key:
    """The work-queue key of an object: (namespace, name). Keys, not objects, go into the queue,
    so the worker always reads the newest copy from the cache when it finally gets to the key."""
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def render(greeting: Obj) -> tuple[str | None, str]:
    """The message for a Greeting, or None and the reason it cannot be rendered."""
    spec = greeting.get("spec", {})
    language = spec.get("language", "en")
    template = TEMPLATES.get(language)
    if template is None:
        known = ", ".join(sorted(TEMPLATES))
        return None, f"language {language!r} is not supported; use one of: {known}"
    return template.format(to=spec["to"]), ""


def configmap_name(greeting: Obj) -> str:
    return f"greeting-{greeting['metadata']['name']}"


def owner_reference(greeting: Obj) -> Obj:
    """An ownerReference marking the Greeting as the controller of what it owns. The garbage
    collector in kube-controller-manager deletes the owned object once the owner is gone."""
    meta = greeting["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def desired_configmap(greeting: Obj, message: str) -> Obj:
    meta = greeting["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": configmap_name(greeting),
            "namespace": meta["namespace"],
            "labels": {OWNER_LABEL: meta["name"]},
            "ownerReferences": [owner_reference(greeting)],
        },
        "data": {"message": message},
    }


def configmap_differs(actual: Obj, desired: Obj) -> bool:
    """Compare only the fields this controller owns; other writers may add labels or annotations."""
    owners = [o.get("uid") for o in actual["metadata"].get("ownerReferences", [])]
    labels = actual["metadata"].get("labels", {})
    return (
        actual.get("data") != desired["data"]
        or desired["metadata"]["ownerReferences"][0]["uid"] not in owners
        or labels.get(OWNER_LABEL) != desired["metadata"]["labels"][OWNER_LABEL]
    )


def index_key(greeting: Obj) -> str:
    """The greeting's entry in the cluster-wide index ConfigMap (namespace.name)."""
    namespace, name = key_of(greeting)
    return f"{namespace}.{name}"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(conditions: list[Obj], new: Obj) -> list[Obj]:
    """Return conditions with `new` merged in, metav1.Condition style.

    lastTransitionTime changes only when the status flips, so a reconcile that finds nothing new
    produces exactly the same list, and the status patch can be skipped.
    """
    result = [c for c in conditions if c.get("type") != new["type"]]
    old = next((c for c in conditions if c.get("type") == new["type"]), None)
    merged = dict(new)
    if old is not None and old.get("status") == new["status"]:
        merged["lastTransitionTime"] = old.get("lastTransitionTime", new["lastTransitionTime"])
    result.append(merged)
    return sorted(result, key=lambda c: str(c["type"]))


def desired_status(greeting: Obj, message: str | None, problem: str) -> Obj:
    """The status a reconcile should write: the Ready condition and the observed generation."""
    generation = greeting["metadata"].get("generation", 1)
    if message is None:
        ready = {"type": "Ready", "status": "False", "reason": "UnsupportedLanguage", "message": problem}
    else:
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "ConfigMapUpToDate",
            "message": f"ConfigMap {configmap_name(greeting)} says {message!r}",
        }
    ready |= {"observedGeneration": generation, "lastTransitionTime": now()}
    old = greeting.get("status", {})
    status: Obj = {
        "observedGeneration": generation,
        "conditions": set_condition(old.get("conditions", []), ready),
    }
    if message is not None:
        status["configMapName"] = configmap_name(greeting)
    elif "configMapName" in old:
        status["configMapName"] = old["configMapName"]
    return status


def ready_condition(greeting: Obj | None) -> Obj | None:
    if greeting is None:
        return None
    conditions = greeting.get("status", {}).get("conditions", [])
    return next((c for c in conditions if c.get("type") == "Ready"), None)


def is_reconciled(greeting: Obj | None) -> bool:
    """True when the status describes the current spec and says Ready=True."""
    if greeting is None:
        return False
    ready = ready_condition(greeting)
    generation = greeting["metadata"].get("generation")
    return (
        ready is not None
        and ready.get("status") == "True"
        and ready.get("observedGeneration") == generation
        and greeting.get("status", {}).get("observedGeneration") == generation
    )
