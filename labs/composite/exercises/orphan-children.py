"""Exercise: retire the WebApp ``legacy`` but keep everything it made.

The check wants the WebApp gone and its Deployment, Service and ConfigMap still there, with no owner
left on them: deleting with orphan propagation tells the garbage collector to remove the
ownerReferences instead of the children.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab

NAME = "legacy"


def check(lab: Lab) -> None:
    sup = lab.support("composite_support")
    if sup.webapp(lab, NAME) is not None:
        raise CheckFailed(f"The WebApp {NAME} still exists in the {sup.TEAM} namespace.")
    for kind, child in (("deployment", NAME), ("service", NAME), ("configmap", f"{NAME}-config")):
        obj = lab.get(kind, child, namespace=sup.TEAM)
        if obj is None:
            raise CheckFailed(
                f"The {kind} {child} is gone: it went with its owner. Recreate the WebApp "
                f"{NAME}, let the controller rebuild it, and delete the WebApp another way."
            )
        if obj["metadata"].get("ownerReferences"):
            raise CheckFailed(
                f"The {kind} {child} still has an ownerReference; is the garbage collector "
                "still working on it? Check again in a moment."
            )


def solve(lab: Lab) -> None:
    sup = lab.support("composite_support")
    sup.start_controller(lab)
    sup.wait_ready(lab, NAME)
    lab.kubectl("delete", "webapp", NAME, "-n", sup.TEAM, "--cascade=orphan", "--wait=true")
    lab.wait_until(
        lambda: (
            not (lab.get("deployment", NAME, namespace=sup.TEAM) or {})
            .get("metadata", {})
            .get("ownerReferences")
        ),
        timeout=30,
        message="the garbage collector never orphaned the Deployment",
    )
