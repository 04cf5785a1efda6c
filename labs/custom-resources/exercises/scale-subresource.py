"""Exercise: declare the scale subresource, so that ``kubectl scale`` and autoscalers work on a MemoryStore.

The check talks to the ``/scale`` endpoint of the MemoryStore ``sessions`` itself, not to kubectl's
output. It acts as the store's controller and reports how many copies serve (``status.replicas``
through ``/status``), then reads the Scale object: its wanted and serving counts must be the
object's own ``spec.replicas`` and ``status.replicas``. Then it scales through ``/scale`` (one copy
more, and back) and reads the object again: ``spec.replicas`` must follow. A scale subresource
whose paths name other fields (``sizeGi``, ``observedGeneration``) shows other numbers, and setting
``spec.replicas`` by hand leaves the endpoint missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab

NAME = "sessions"


def _store(lab: Lab) -> dict[str, Any]:
    c = lab.support("memorystore_crd")
    obj = lab.get(f"memorystores.{c.GROUP}", NAME, namespace=c.NAMESPACE)
    if obj is None:
        raise CheckFailed(f"The MemoryStore {NAME} is missing from the store namespace; reset the lab to get it back.")
    return obj


def _scale(lab: Lab, version: str) -> dict[str, Any]:
    c = lab.support("memorystore_crd")
    reply = c.read_scale(lab, NAME, version)
    if reply.object is None:
        raise CheckFailed(
            f"GET {c.scale_url(NAME, version)} is refused ({reply.message or 'no Scale came back'}). The "
            f"object exists, so it is the /scale endpoint that version {version} of the CRD does not serve."
        )
    return reply.object


def _numbers(obj: Any) -> set[int]:
    """Every whole number in the object's spec and status, and its generation."""
    if isinstance(obj, dict):
        found = {n for key, value in obj.items() if key != "metadata" for n in _numbers(value)}
        return found | ({obj["metadata"].get("generation", 0)} if "metadata" in obj else set())
    if isinstance(obj, list):
        return {n for value in obj for n in _numbers(value)}
    return {obj} if isinstance(obj, int) and not isinstance(obj, bool) else set()


def check(lab: Lab) -> None:
    c = lab.support("memorystore_crd")
    store = _store(lab)
    wanted = store["spec"].get("replicas", 1)
    # Act as the store's controller and report how many copies serve: a number that no other field of the
    # object holds, so that a statusReplicasPath naming another field cannot show it by chance.
    serving = next(n for n in range(max(wanted - 1, 0), wanted + 100) if n not in _numbers(store))
    c.try_patch(lab, NAME, {"status": {"replicas": serving}}, subresource="status", dry_run=False)
    for version in [v["name"] for v in c.crd(lab)["spec"]["versions"] if v["served"]]:
        scale = _scale(lab, version)
        if scale["spec"].get("replicas", 0) != wanted:
            raise CheckFailed(
                f"The Scale of {NAME} ({version}) says {scale['spec'].get('replicas', 0)} copies are wanted, but "
                f"the object's spec asks for {wanted} replicas: the wanted count is read from another field."
            )
        shown = scale.get("status", {}).get("replicas", 0)
        if shown != serving:
            raise CheckFailed(
                f"{NAME}'s status says {serving} copies serve, but its Scale ({version}) reports {shown}: the "
                "serving count is read from another field."
            )
    for target in (wanted + 1, wanted):
        reply = c.try_patch(lab, NAME, {"spec": {"replicas": target}}, subresource="scale", dry_run=False)
        if not reply.allowed:
            raise CheckFailed(f"Scaling {NAME} to {target} through its /scale endpoint is refused: {reply.message}")
        now = _store(lab)["spec"].get("replicas")
        if now != target:
            raise CheckFailed(
                f"{NAME} was scaled to {target} through /scale, but its spec.replicas is {now}: the scale "
                "subresource writes another field."
            )


def solve(lab: Lab) -> None:
    c = lab.support("memorystore_crd")
    c.declare_scale(lab, {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    })
    c.settle(lab, lambda: c.scale_matches(lab, "primary") and c.scale_matches(lab, NAME), "the scale subresource")


def _set_replicas_by_hand(lab: Lab) -> None:
    """Skip the CRD and write spec.replicas directly, as if kubectl scale had worked."""
    c = lab.support("memorystore_crd")
    lab.kubectl("patch", f"memorystores.{c.GROUP}", NAME, "-n", c.NAMESPACE, "--type=merge",
                "-p", json.dumps({"spec": {"replicas": 3}}))


def _declare_and_wait(lab: Lab, scale: dict[str, str]) -> None:
    c = lab.support("memorystore_crd")
    c.declare_scale(lab, scale)
    c.settle(lab, lambda: c.read_scale(lab, NAME).allowed, "the scale subresource")


def _size_as_replicas(lab: Lab) -> None:
    """specReplicasPath on .spec.sizeGi: a number under spec, but the memory, not the copies."""
    _declare_and_wait(lab, {"specReplicasPath": ".spec.sizeGi", "statusReplicasPath": ".status.replicas"})


def _generation_as_serving(lab: Lab) -> None:
    """statusReplicasPath on .status.observedGeneration: a number under status, but not the serving count."""
    _declare_and_wait(lab, {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.observedGeneration"})


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "patch spec.replicas directly": _set_replicas_by_hand,
    "specReplicasPath on sizeGi": _size_as_replicas,
    "statusReplicasPath on observedGeneration": _generation_as_serving,
}
