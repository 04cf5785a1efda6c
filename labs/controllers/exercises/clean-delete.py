"""Exercise: delete demo/farewell so that nothing of it is left: not the object, not its ConfigMap,
and not its entry in the cluster-wide index that only the controller's finalizer cleans up."""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab
from krmcourse.labcode import lab_module

# The lab's own greeter package, as the notebook uses it.
model, once = lab_module("controllers", "greeter.model"), lab_module("controllers", "greeter.once")

NAMESPACE, NAME = "demo", "farewell"


def _index(lab: Lab) -> dict[str, str]:
    index = lab.get("configmap", model.INDEX_NAME, namespace=model.INDEX_NAMESPACE)
    return (index or {}).get("data") or {}


def check(lab: Lab) -> None:
    farewell = lab.get("greeting", NAME, namespace=NAMESPACE)
    if farewell is not None:
        if farewell["metadata"].get("deletionTimestamp"):
            raise CheckFailed(
                f"farewell is Terminating, held by its finalizers "
                f"{farewell['metadata'].get('finalizers')}: something still has to finish it."
            )
        raise CheckFailed("The Greeting demo/farewell still exists.")
    key = f"{NAMESPACE}.{NAME}"
    if key in _index(lab):
        raise CheckFailed(
            f"farewell is gone, but the index greeting-system/{model.INDEX_NAME} "
            f"still has the entry {key!r}: the cleanup its finalizer stood for never ran."
        )
    if lab.get("configmap", "greeting-farewell", namespace=NAMESPACE) is not None:
        raise CheckFailed(
            "The ConfigMap greeting-farewell is still there. Garbage collection removes it "
            "shortly after its owner is gone; check again in a few seconds."
        )


def solve(lab: Lab) -> None:
    farewell = lab.get("greeting", NAME, namespace=NAMESPACE)
    if farewell is None:
        # Gone without its cleanup (its finalizer was taken off by hand): do what the finalizer stood for.
        if f"{NAMESPACE}.{NAME}" in _index(lab):
            lab.kubectl("patch", "configmap", model.INDEX_NAME, "-n", model.INDEX_NAMESPACE, "--type=json",
                        "-p", json.dumps([{"op": "remove", "path": f"/data/{NAMESPACE}.{NAME}"}]))
        return
    if not farewell["metadata"].get("deletionTimestamp"):
        # Make sure the finalizer and the index entry exist, as they do once a controller has run.
        once.reconcile_now(lab.kubeconfig, NAMESPACE, NAME)
        lab.delete("greeting", NAME, namespace=NAMESPACE, wait=False)
    once.reconcile_now(lab.kubeconfig, NAMESPACE, NAME)  # the finalizer's cleanup
    lab.wait_until(
        lambda: (
            lab.get("greeting", NAME, namespace=NAMESPACE) is None
            and lab.get("configmap", "greeting-farewell", namespace=NAMESPACE) is None
        ),
        timeout=60,
        message="farewell or its ConfigMap is still there",
    )


def _strip_the_finalizer(lab: Lab) -> None:
    """Delete farewell, then take its finalizer off by hand instead of letting a controller finish it."""
    once.reconcile_now(lab.kubeconfig, NAMESPACE, NAME)  # the finalizer and index entry, as after the notebook
    lab.delete("greeting", NAME, namespace=NAMESPACE, wait=False)
    lab.kubectl("patch", "greeting", NAME, "-n", NAMESPACE, "--type=merge", "-p", '{"metadata": {"finalizers": null}}')
    lab.wait_until(lambda: lab.get("greeting", NAME, namespace=NAMESPACE) is None, timeout=30,
                   message="farewell is still there")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {"remove the finalizer by hand": _strip_the_finalizer}
