"""Exercise: run the WebApp ``shop``'s pods on the lab's second simulated node only.

The WebApp offers a few chosen override fields instead of a whole pod template. The check wants the
choice declared on the WebApp (where its owners look) and every pod of the Deployment scheduled on
that node by the real scheduler.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab

NAME = "shop"


def target(lab: Lab) -> str:
    """The second simulated node, found by label as on every provider (``lab.nodes()``)."""
    return lab.nodes()[1]


def check(lab: Lab) -> None:
    sup = lab.support("composite_support")
    app = sup.webapp(lab, NAME)
    if app is None:
        raise CheckFailed(f"The WebApp {NAME} is missing from the {sup.TEAM} namespace.")
    node = target(lab)
    pods = [p for p in sup.pods_of(lab, NAME) if not p["metadata"].get("deletionTimestamp")]
    where = sorted({p["spec"].get("nodeName") or "(not scheduled)" for p in pods})
    if not (app["spec"].get("nodeSelector") or {}):
        raise CheckFailed(f"The WebApp {NAME} does not say where its pods may run; its pods are on {where}.")
    if where != [node]:
        raise CheckFailed(
            f"The pods of {NAME} are on {where}, not only on {node} (a rollout may still be "
            "going on; check again in a moment)."
        )
    if len(pods) != app["spec"]["replicas"]:
        raise CheckFailed(
            f"{len(pods)} pods of {NAME} exist, but the WebApp asks for {app['spec']['replicas']}."
        )


def solve(lab: Lab) -> None:
    sup = lab.support("composite_support")
    sup.start_controller(lab)
    lab.kubectl(
        "patch",
        "webapp",
        NAME,
        "-n",
        sup.TEAM,
        "--type=merge",
        "-p",
        '{"spec": {"nodeSelector": {"kubernetes.io/hostname": "' + target(lab) + '"}}}',
    )
    sup.wait_ready(lab, NAME)
    lab.wait_until(lambda: _settled(lab), timeout=60, message="the pods never all moved to " + target(lab))


def _settled(lab: Lab) -> bool:
    try:
        check(lab)
    except CheckFailed:
        return False
    return True
