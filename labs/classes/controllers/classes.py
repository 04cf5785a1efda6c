"""How a Cache's class is chosen and how its effective settings are computed (shared logic).

Used by the enforcer webhook (copy at creation), the live controller, and the exercise checks, so
all three apply the same rules to the real objects:
  * spec.className names the class; when it is empty, the default class is used.
  * The default class is the one annotated classes.krmcourse.dev/is-default-class: "true". If several
    are, the newest wins, as current Kubernetes does for StorageClass.
  * A field set in the Cache's spec wins over the class's value.
"""

from __future__ import annotations

from typing import Any

DEFAULT_ANNOTATION = "classes.krmcourse.dev/is-default-class"
FIELDS = ("memoryMiB", "evictionPolicy", "replicas")


def default_class(classes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The class marked as default (the newest one if an admin marked several)."""
    marked = [c for c in classes if c["metadata"].get("annotations", {}).get(DEFAULT_ANNOTATION) == "true"]
    marked.sort(key=lambda c: (c["metadata"]["creationTimestamp"], c["metadata"]["name"]))
    return marked[-1] if marked else None


def class_for(cache: dict[str, Any], classes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The class a Cache uses: the one it names, or the default when it names none."""
    name = cache.get("spec", {}).get("className")
    if not name:
        return default_class(classes)
    return next((c for c in classes if c["metadata"]["name"] == name), None)


def effective(cache: dict[str, Any], cls: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, str]]:
    """(effective settings, where each came from): spec first, then the class."""
    spec = cache.get("spec", {})
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field in FIELDS:
        if field in spec:
            values[field], sources[field] = spec[field], "spec"
        elif cls is not None and field in cls.get("spec", {}):
            values[field], sources[field] = cls["spec"][field], "class"
    return values, sources


def defaults_patch(cache: dict[str, Any], cls: dict[str, Any]) -> list[dict[str, Any]]:
    """JSONPatch operations that copy the class name and every missing field into the Cache's spec."""
    ops: list[dict[str, Any]] = []
    spec = cache.get("spec")
    if spec is None:
        ops.append({"op": "add", "path": "/spec", "value": {}})
        spec = {}
    if not spec.get("className"):
        ops.append({"op": "add", "path": "/spec/className", "value": cls["metadata"]["name"]})
    for field in FIELDS:
        if field not in spec and field in cls["spec"]:
            ops.append({"op": "add", "path": f"/spec/{field}", "value": cls["spec"][field]})
    return ops
