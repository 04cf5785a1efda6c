"""Exercise: hand the hand-made Service ``shop`` over to the WebApp ``shop``.

The controller refuses to take over an object it did not create unless the object says it is part
of that WebApp. The check wants the hand-made Service itself (created before the WebApp, as the lab
made it: a Service made later has another address), controlled by the WebApp (matching uid), and the
WebApp Ready, which also means the Service now selects the WebApp's pods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab

NAME = "shop"


def check(lab: Lab) -> None:
    sup = lab.support("composite_support")
    app = sup.webapp(lab, NAME)
    if app is None:
        raise CheckFailed(f"The WebApp {NAME} is missing from the {sup.TEAM} namespace.")
    svc = lab.get("service", NAME, namespace=sup.TEAM)
    if svc is None:
        raise CheckFailed(f"There is no Service {NAME}; it holds the address other teams use, keep it.")
    if _made_after_the_webapp(svc, app):
        raise CheckFailed(
            f"The Service {NAME} was created at {svc['metadata']['creationTimestamp']}, after the WebApp "
            f"({app['metadata']['creationTimestamp']}): it is not the hand-made one. That one was deleted, and "
            "its cluster IP, the address other teams use, went with it."
        )
    ref = sup.controller_of(svc)
    if ref is None or ref.get("uid") != app["metadata"]["uid"]:
        raise CheckFailed(
            f"The Service {NAME} is not controlled by the WebApp {NAME} yet. "
            "Read the WebApp's Ready condition: it says why it does not take it."
        )
    cond = sup.ready(app)
    if cond.get("status") != "True":
        raise CheckFailed(f"The WebApp {NAME} is not Ready: {cond.get('reason')}: {cond.get('message')}")


def _made_after_the_webapp(svc: dict[str, Any], app: dict[str, Any]) -> bool:
    """Whether the Service is younger than the WebApp; the hand-made one is older (UTC timestamps sort as text)."""
    return bool(svc["metadata"]["creationTimestamp"] > app["metadata"]["creationTimestamp"])


def solve(lab: Lab) -> None:
    sup = lab.support("composite_support")
    sup.start_controller(lab)
    _put_back_a_deleted_service(lab)  # only after an attempt that deleted it: its address is gone anyway
    lab.kubectl("label", "service", NAME, "-n", sup.TEAM, f"app.kubernetes.io/part-of={NAME}", "--overwrite")
    sup.wait_ready(lab, NAME)


def _put_back_a_deleted_service(lab: Lab) -> None:
    """If the hand-made Service was deleted, put shop back as the lab made it: the Service, then the WebApp."""
    sup = lab.support("composite_support")
    app, svc = sup.webapp(lab, NAME), lab.get("service", NAME, namespace=sup.TEAM)
    if app is not None and svc is not None and not _made_after_the_webapp(svc, app):
        return
    lab.delete("webapp", NAME, namespace=sup.TEAM)  # the garbage collector takes the WebApp's own Service
    lab.wait_until(lambda: lab.get("service", NAME, namespace=sup.TEAM) is None
                   and lab.get("deployment", NAME, namespace=sup.TEAM) is None, timeout=60,
                   message=f"the children of {NAME} outlived it")
    lab.apply(sup.starting_objects(NAME))


def _copy_the_childrens_label(lab: Lab) -> None:
    """Label the Service app.kubernetes.io/managed-by=webapp-controller, as the WebApp's children are labelled."""
    sup = lab.support("composite_support")
    sup.start_controller(lab)
    lab.kubectl("label", "service", NAME, "-n", sup.TEAM, "app.kubernetes.io/managed-by=webapp-controller",
                "--overwrite")


def _delete_it(lab: Lab) -> None:
    """Delete the hand-made Service, as the WebApp's message offers, and restart the controller to make its own."""
    sup = lab.support("composite_support")
    lab.delete("service", NAME, namespace=sup.TEAM)
    sup.start_controller(lab).restart()  # an unlabelled Service going away wakes no WebApp: a restart does
    lab.wait_until(lambda: lab.get("service", NAME, namespace=sup.TEAM), timeout=60,
                   message="the WebApp never made its own Service")
    sup.wait_ready(lab, NAME)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "the managed-by label that the children carry": _copy_the_childrens_label,
    "delete the hand-made Service and let the WebApp make one": _delete_it,
}
