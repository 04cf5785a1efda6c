"""Exercise: hand the hand-made Service ``shop`` over to the WebApp ``shop``.

The controller refuses to take over an object it did not create unless the object says it is part
of that WebApp. The check wants the Service controlled by the WebApp (matching uid) and the WebApp
Ready, which also means the Service now selects the WebApp's pods.
"""

from __future__ import annotations

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
    ref = sup.controller_of(svc)
    if ref is None or ref.get("uid") != app["metadata"]["uid"]:
        raise CheckFailed(
            f"The Service {NAME} is not controlled by the WebApp {NAME} yet. "
            "Read the WebApp's Ready condition: it says why it does not take it."
        )
    cond = sup.ready(app)
    if cond.get("status") != "True":
        raise CheckFailed(f"The WebApp {NAME} is not Ready: {cond.get('reason')}: {cond.get('message')}")


def solve(lab: Lab) -> None:
    sup = lab.support("composite_support")
    sup.start_controller(lab)
    lab.kubectl("label", "service", NAME, "-n", sup.TEAM, f"app.kubernetes.io/part-of={NAME}", "--overwrite")
    sup.wait_ready(lab, NAME)
