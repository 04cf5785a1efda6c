"""Exercise: retire the WebApp ``legacy`` but keep everything it made.

The check wants the WebApp gone and its Deployment, Service and ConfigMap still there, with no owner
left on them: deleting with orphan propagation tells the garbage collector to remove the
ownerReferences instead of the children.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab, ManagedProcess

NAME = "legacy"
CHILDREN = (("deployment", NAME), ("service", NAME), ("configmap", f"{NAME}-config"))


def check(lab: Lab) -> None:
    sup = lab.support("composite_support")
    if sup.webapp(lab, NAME) is not None:
        raise CheckFailed(f"The WebApp {NAME} still exists in the {sup.TEAM} namespace.")
    for kind, child in CHILDREN:
        obj = lab.get(kind, child, namespace=sup.TEAM)
        if obj is None:
            raise CheckFailed(
                f"The {kind} {child} is gone: it went with its owner. The garbage collector in "
                "kube-controller-manager deletes whatever an ownerReference ties to a deleted owner, whether "
                f"or not the WebApp controller runs. Recreate the WebApp {NAME}, let the controller rebuild "
                "it, and delete the WebApp another way."
            )
        if obj["metadata"].get("ownerReferences"):
            raise CheckFailed(
                f"The {kind} {child} still has an ownerReference; is the garbage collector "
                "still working on it? Check again in a moment."
            )


def solve(lab: Lab) -> None:
    sup = lab.support("composite_support")
    # The garbage collector orphans only the children it has seen. Children made a moment ago (when an
    # earlier try lost them, and legacy was made again) may still be unknown to it: then they go with
    # their owner, and the answer is to make legacy once more and orphan it again.
    for _ in range(3):
        _legacy_ready(lab)
        lab.kubectl("delete", "webapp", NAME, "-n", sup.TEAM, "--cascade=orphan", "--wait=true")
        lab.wait_until(lambda: all(_orphaned_or_gone(lab, kind, child) for kind, child in CHILDREN), timeout=60,
                       message="the garbage collector neither orphaned nor deleted the children")
        if lab.solved("orphan-children"):
            return


def _orphaned_or_gone(lab: Lab, kind: str, name: str) -> bool:
    obj = lab.get(kind, name, namespace=lab.support("composite_support").TEAM)
    return obj is None or not obj["metadata"].get("ownerReferences")


def _legacy_ready(lab: Lab) -> ManagedProcess:
    """As the notebook has it: the controller running and legacy Ready (re-made if an attempt lost it)."""
    sup = lab.support("composite_support")
    controller: ManagedProcess = sup.start_controller(lab)
    if sup.webapp(lab, NAME) is None:
        lab.apply(sup.starting_objects(NAME))
    sup.wait_ready(lab, NAME)
    return controller


def _delete_and_wait(lab: Lab) -> None:
    """Delete legacy with the default propagation, as kubectl delete does, and watch the children go."""
    team = lab.support("composite_support").TEAM
    lab.delete("webapp", NAME, namespace=team)
    lab.wait_until(lambda: all(lab.get(k, n, namespace=team) is None for k, n in CHILDREN), timeout=120,
                   message=f"the children of {NAME} outlived it")  # a fresh garbage collector learns of WebApps late


def _delete_it_normally(lab: Lab) -> None:
    """Delete legacy the default way, while the controller runs."""
    _legacy_ready(lab)
    _delete_and_wait(lab)


def _stop_the_controller_first(lab: Lab) -> None:
    """Stop the WebApp controller, thinking it is what deletes the children, then delete legacy the default way."""
    _legacy_ready(lab).stop()
    _delete_and_wait(lab)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "delete the WebApp the default way": _delete_it_normally,
    "stop the controller, then delete the WebApp": _stop_the_controller_first,
}
