"""Exercise: delete demo/farewell so that nothing of it is left: not the object, not its ConfigMap,
and not its entry in the cluster-wide index that only the controller's finalizer cleans up."""

from __future__ import annotations

import sys

from krmcourse import CheckFailed, Lab

NAMESPACE, NAME = "demo", "farewell"


def _greeter(lab: Lab):  # noqa: ANN202 - returns the lab's own package
    if str(lab.path) not in sys.path:
        sys.path.insert(0, str(lab.path))
    import greeter.model
    import greeter.once

    return greeter


def _index(lab: Lab, greeter) -> dict:  # noqa: ANN001
    index = lab.get("configmap", greeter.model.INDEX_NAME, namespace=greeter.model.INDEX_NAMESPACE)
    return (index or {}).get("data") or {}


def check(lab: Lab) -> None:
    greeter = _greeter(lab)
    farewell = lab.get("greeting", NAME, namespace=NAMESPACE)
    if farewell is not None:
        if farewell["metadata"].get("deletionTimestamp"):
            raise CheckFailed(
                f"farewell is Terminating, held by its finalizers "
                f"{farewell['metadata'].get('finalizers')}: something still has to finish it."
            )
        raise CheckFailed("The Greeting demo/farewell still exists.")
    key = f"{NAMESPACE}.{NAME}"
    if key in _index(lab, greeter):
        raise CheckFailed(
            f"farewell is gone, but the index greeting-system/{greeter.model.INDEX_NAME} "
            f"still has the entry {key!r}: the cleanup its finalizer stood for never ran."
        )
    if lab.get("configmap", "greeting-farewell", namespace=NAMESPACE) is not None:
        raise CheckFailed(
            "The ConfigMap greeting-farewell is still there. Garbage collection removes it "
            "shortly after its owner is gone; check again in a few seconds."
        )


def solve(lab: Lab) -> None:
    greeter = _greeter(lab)
    farewell = lab.get("greeting", NAME, namespace=NAMESPACE)
    if farewell is None:
        return
    if not farewell["metadata"].get("deletionTimestamp"):
        # Make sure the finalizer and the index entry exist, as they do once a controller has run.
        greeter.once.reconcile_now(lab.kubeconfig, NAMESPACE, NAME)
        lab.delete("greeting", NAME, namespace=NAMESPACE, wait=False)
    greeter.once.reconcile_now(lab.kubeconfig, NAMESPACE, NAME)  # the finalizer's cleanup
    lab.wait_until(
        lambda: (
            lab.get("greeting", NAME, namespace=NAMESPACE) is None
            and lab.get("configmap", "greeting-farewell", namespace=NAMESPACE) is None
        ),
        timeout=60,
        message="farewell or its ConfigMap is still there",
    )
